"""Multi-node on Ray: a real two-node Ray cluster on this machine, the simulated
mesh deployed with `serve deploy`, replica-0 pinned to the head and replica-1 to node 2; then
node 2 is killed (SIGKILL of its raylet and everything under it) under a steady load.

What it shows: before the kill every request succeeds and both replicas serve some; after it
every request is answered within ANSWER_S (no hang), a failure is a clear one (an HTTP error
status or an OpenAI error event in the stream), and after a short recovery the mesh keeps
serving from the head. `pytest -s` prints the counts and the recovery time.

The cluster is this module's own (tests/integration/multinode_cluster.py): its own temp dir,
ports and token auth; other Ray clusters on the machine are left alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import httpx
import pytest

from tests.integration.multinode_cluster import (
    Cluster,
    app_statuses,
    kill_node2,
    new_cluster,
    start,
    stop,
)

pytestmark = [pytest.mark.mesh, pytest.mark.slow]

MODEL = "llama-3.1-8b"
ANSWER_S = 10.0  # every request is answered, and no stream stalls, longer than this
STREAM_LIMIT_S = 60.0  # a whole stream, at most
RATE = 4.0  # requests per second
BEFORE_S = 10.0  # load before the kill
AFTER_S = 20.0  # load after the kill
RECOVERY_LIMIT_S = 10.0
CONSECUTIVE_OK = 10


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    temp_dir = tempfile.mkdtemp(prefix="slomesh-mn-", dir="/tmp")
    c = new_cluster(temp_dir)
    try:
        start(c)
        yield c
    except BaseException:
        print("\n".join(c.log[-6:]))
        raise
    finally:
        stop(temp_dir)


# ---------------------------------------------------------------- load


@dataclass
class Outcome:
    sent_s: float
    elapsed_s: float = 0.0
    status: int | None = None
    done: bool = False
    error_event: str = ""
    transport_error: str = ""
    stream_id: str = ""
    chunks: int = 0
    last_chunk_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.done and not self.error_event

    @property
    def kind(self) -> str:
        if self.ok:
            return "ok"
        if self.transport_error:
            return f"transport:{self.transport_error}"
        if self.status != 200:
            return f"http_{self.status}"
        if self.error_event:
            return "stream_error_event"
        return "stream_cut_without_done"

    @property
    def clear_error(self) -> bool:
        return (self.status is not None and self.status != 200) or bool(self.error_event)


async def _request(c: httpx.AsyncClient, t0: float, max_tokens: int) -> Outcome:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "summarise this: " + "word " * 40}],
        "max_tokens": max_tokens,
        "stream": True,
    }
    o = Outcome(time.monotonic() - t0)
    start = time.monotonic()
    try:
        # an answer (headers) within ANSWER_S and no stall longer than that between chunks
        # (httpx's read timeout); a long stream may take longer in all, up to STREAM_LIMIT_S
        async with asyncio.timeout(STREAM_LIMIT_S):
            async with c.stream(
                "POST", "/v1/chat/completions", json=body, timeout=httpx.Timeout(ANSWER_S)
            ) as r:
                o.status = r.status_code
                o.stream_id = r.headers.get("x-slomesh-request-id", "")
                async for line in r.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    o.chunks += 1
                    o.last_chunk_s = time.monotonic() - start
                    if data == "[DONE]":
                        o.done = True
                        continue
                    with contextlib.suppress(ValueError):
                        event = json.loads(data)
                        if isinstance(event, dict) and "error" in event:
                            o.error_event = str(event["error"])[:200]
    except (TimeoutError, httpx.ReadTimeout):
        o.transport_error = "hang"
    except httpx.HTTPError as err:
        o.transport_error = type(err).__name__
    o.elapsed_s = time.monotonic() - start
    return o


class ReplicaSampler:
    """Samples each replica's held request ids (Replica.Status over gRPC, with the mesh
    credential) in a thread, to see which replica served which request."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.seen: dict[str, set[str]] = {"replica-0": set(), "replica-1": set()}
        self.active = True
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ReplicaSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        from shared.rpc.slomesh.v1 import replica_pb2, replica_pb2_grpc

        token = self.cluster.env["SLOMESH_MESH_TOKEN"]
        target = f"127.0.0.1:{self.cluster.grpc_port}"
        with grpc.insecure_channel(target) as channel:
            stub = replica_pb2_grpc.ReplicaStub(channel)  # type: ignore[no-untyped-call]
            while not self._stop.wait(0.1):
                if not self.active:
                    continue
                for name, held in self.seen.items():
                    with contextlib.suppress(grpc.RpcError):
                        st = stub.Status(
                            replica_pb2.StatusQuery(),
                            metadata=[("application", name), ("x-slomesh-mesh-token", token)],
                            timeout=0.5,
                        )
                        held.update(st.request_ids)

    def replica_of(self, stream_id: str) -> str | None:
        for name, held in self.seen.items():
            if stream_id and any(stream_id.endswith(rid) for rid in held):
                return name
        return None


async def _load(cluster: Cluster, kill: Any) -> tuple[list[Outcome], float, list[Outcome]]:
    """Open-loop load at RATE for BEFORE_S + AFTER_S; `kill()` runs at BEFORE_S. Then
    CONSECUTIVE_OK sequential requests. Returns (outcomes, kill time, tail outcomes)."""
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
    timeout = httpx.Timeout(ANSWER_S + 5)
    async with httpx.AsyncClient(base_url=cluster.http, limits=limits, timeout=timeout) as c:
        t0 = time.monotonic()
        tasks: list[asyncio.Task[Outcome]] = []
        kill_s = -1.0
        i = 0
        while True:
            at = i / RATE
            if at >= BEFORE_S + AFTER_S:
                break
            if kill_s < 0 and at >= BEFORE_S:
                await asyncio.sleep(max(0.0, t0 + BEFORE_S - time.monotonic()))
                kill_s = time.monotonic() - t0
                await asyncio.to_thread(kill)
            await asyncio.sleep(max(0.0, t0 + at - time.monotonic()))
            # long enough streams that some are in flight on node 2 when it dies
            tasks.append(asyncio.create_task(_request(c, t0, 256 + 128 * (i % 4))))
            i += 1
        outcomes = list(await asyncio.gather(*tasks))
        tail = [await _request(c, t0, 64) for _ in range(CONSECUTIVE_OK)]
    return outcomes, kill_s, tail


def _answered_well(o: Outcome) -> bool:
    """Served, or turned away at once with 429/503 (the surviving node at capacity)."""
    return o.ok or o.status in (429, 503)


def _recovery_s(after: list[Outcome], kill_s: float) -> float | None:
    """Seconds from the kill to the send time of the first request from which every later one
    was served or turned away at once (no failure on the lost node any more)."""
    ordered = sorted(after, key=lambda o: o.sent_s)
    for k, o in enumerate(ordered):
        if all(_answered_well(x) for x in ordered[k:]):
            return max(0.0, o.sent_s - kill_s)
    return None


def test_node_loss_under_load(cluster: Cluster) -> None:
    assert cluster.node2_raylet is not None

    def kill() -> None:
        pids = kill_node2(cluster)
        cluster.log.append(f"killed node 2: {sorted(pids)}")

    with ReplicaSampler(cluster) as sampler:
        outcomes, kill_s, tail = asyncio.run(_load(cluster, kill))
        sampler.active = False

    before = [o for o in outcomes if o.sent_s + o.elapsed_s < kill_s]
    during = [o for o in outcomes if o.sent_s < kill_s <= o.sent_s + o.elapsed_s]
    after = [o for o in outcomes if o.sent_s >= kill_s]
    served = {
        name: sum(1 for o in before if sampler.replica_of(o.stream_id) == name)
        for name in sampler.seen
    }
    recovery = _recovery_s(after, kill_s)
    first_ok = min((o.sent_s - kill_s for o in after if o.ok), default=None)
    report = {
        "killed_node2_at_s": round(kill_s, 2),
        "before_kill": dict(Counter(o.kind for o in before)),
        "before_kill_served_by": served,
        "in_flight_at_kill": dict(Counter(o.kind for o in during)),
        "in_flight_at_kill_on": dict(Counter(str(sampler.replica_of(o.stream_id)) for o in during)),
        "after_kill": dict(Counter(o.kind for o in after)),
        "first_ok_after_kill_s": None if first_ok is None else round(first_ok, 2),
        "recovery_s": None if recovery is None else round(recovery, 2),
        "max_elapsed_s": round(max(o.elapsed_s for o in outcomes), 2),
        "after_kill_failures": [
            (
                round(o.sent_s - kill_s, 2),
                o.kind,
                str(sampler.replica_of(o.stream_id)),
                f"{o.chunks} chunks, last at {o.last_chunk_s:.2f} s, ended at {o.elapsed_s:.2f} s",
                o.error_event[:80],
            )
            for o in after + during
            if not o.ok
        ],
        f"tail_{CONSECUTIVE_OK}_sequential": dict(Counter(o.kind for o in tail)),
    }
    print("\n[multinode] " + json.dumps(report, indent=1))
    with contextlib.suppress(Exception):
        print("[multinode] serve status after the kill:", app_statuses(cluster))

    assert before and all(o.ok for o in before), report["before_kill"]
    assert all(served.values()), f"both replicas serve before the kill: {served}"
    hangs = [o for o in outcomes + tail if o.transport_error == "hang"]
    assert not hangs, f"{len(hangs)} requests unanswered or stalled for {ANSWER_S} s: {hangs[:3]}"
    unclear = [o.kind for o in during + after if not o.ok and not o.clear_error]
    assert not unclear, f"failures without an HTTP error status or error event: {unclear}"
    assert recovery is not None and recovery <= RECOVERY_LIMIT_S, report["recovery_s"]
    assert all(o.ok for o in tail), report[f"tail_{CONSECUTIVE_OK}_sequential"]
