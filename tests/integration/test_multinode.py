"""Multi-node on Ray: a real two-node Ray cluster on this machine, the simulated
mesh deployed with `serve deploy`, replica-0 pinned to the head and replica-1 to node 2; then
node 2 is killed (SIGKILL of its raylet and everything under it) under a steady load.

What it shows: before the kill every request succeeds and both replicas serve some; after it
every request is answered within ANSWER_S (no hang), a failure is a clear one (an HTTP error
status or an OpenAI error event in the stream), and after a short recovery the mesh keeps
serving from the head. `pytest -s` prints the counts and the recovery time.

The cluster is this module's own: its own temp dir, GCS/dashboard/agent/worker ports, Serve
HTTP/gRPC ports, and token auth. Other Ray clusters on the machine are left alone: nothing runs
`ray stop`; clean-up kills only process trees whose command line names this temp dir.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import yaml
from ray._private import ray_constants

from slomesh.launch import mesh

pytestmark = [pytest.mark.mesh, pytest.mark.slow]

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]
MODEL = "llama-3.1-8b"
ANSWER_S = 10.0  # every request is answered, and no stream stalls, longer than this
STREAM_LIMIT_S = 60.0  # a whole stream, at most
DEPLOY_TIMEOUT_S = 300.0
RATE = 4.0  # requests per second
BEFORE_S = 10.0  # load before the kill
AFTER_S = 20.0  # load after the kill
RECOVERY_LIMIT_S = 10.0
CONSECUTIVE_OK = 10
CONTROL = {
    "ingress": "IngressDeployment",
    "scheduler": "SchedulerDeployment",
    "predictor": "PredictorDeployment",
    "profiler": "ProfilerDeployment",
    "deployer": "DeployerDeployment",
}


# ---------------------------------------------------------------- cluster plumbing


_HANDED_OUT: set[int] = set()
"""Ports `_free_port` already gave (not bound until Ray starts: the kernel may offer one again)."""


def _free_port() -> int:
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port
    raise RuntimeError("no free port")


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


_TAKEN_RANGES: list[tuple[int, int]] = []
"""Worker port ranges already handed to a node of this module (not bound until Ray starts)."""


def _ephemeral_low() -> int:
    """The lowest port the kernel hands out for bind(0) (`_free_port`), 32768 by default."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _port_range(width: int) -> tuple[int, int]:
    """A range of `width` free ports (for one node's workers), below the kernel's ephemeral
    range, so no port `_free_port` picks for another component can fall inside it (Ray refuses
    to start when two components share a port), and apart from the ranges already handed out."""
    top = max(_ephemeral_low() - width, 10000 + width)
    for _ in range(200):
        base = secrets.randbelow(top - 10000) + 10000
        hi = base + width - 1
        if any(base <= t_hi and t_lo <= hi for t_lo, t_hi in _TAKEN_RANGES):
            continue
        if all(_port_free(p) for p in range(base, base + width)):
            _TAKEN_RANGES.append((base, hi))
            return base, hi
    raise RuntimeError("no free worker port range")


def _processes() -> list[tuple[int, int, str]]:
    """(pid, ppid, full command line) of every process, from /proc (`ps` cuts long lines)."""
    procs = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                args = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        procs.append((int(entry.name), ppid, args))
    return procs


def _tree(roots: set[int]) -> set[int]:
    """`roots` and all their descendants (Ray workers are the raylet's children; their command
    lines are rewritten to `ray::...`, so they are found by parentage, not by the temp dir)."""
    procs = _processes()
    found = set(roots)
    grew = True
    while grew:
        grew = False
        for pid, ppid, _ in procs:
            if ppid in found and pid not in found:
                found.add(pid)
                grew = True
    found.discard(os.getpid())
    return found


def _kill(pids: set[int], sig: int = signal.SIGKILL) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _raylets(marker: str) -> set[int]:
    return {
        pid
        for pid, _, args in _processes()
        if "/raylet/raylet" in args.split(" ", 1)[0] and marker in args
    }


def _ours(temp_dir: str) -> set[int]:
    return _tree({pid for pid, _, args in _processes() if temp_dir in args})


@dataclass
class Cluster:
    temp_dir: str
    env: dict[str, str]
    gcs_port: int
    dashboard_port: int
    http_port: int
    grpc_port: int
    config: dict[str, Any] = field(default_factory=dict)
    config_file: Path | None = None
    node2_raylet: int | None = None
    log: list[str] = field(default_factory=list)

    @property
    def dashboard(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def run(self, *cmd: str, timeout: float = 120.0) -> str:
        proc = subprocess.run(
            [str(BIN / cmd[0]), *cmd[1:]],
            env=self.env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        self.log.append(f"$ {' '.join(cmd)}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{self.log[-1]}")
        return proc.stdout


def _node_ports() -> list[str]:
    lo, hi = _port_range(64)
    return [
        f"--node-manager-port={_free_port()}",
        f"--object-manager-port={_free_port()}",
        f"--min-worker-port={lo}",
        f"--max-worker-port={hi}",
        f"--dashboard-agent-listen-port={_free_port()}",
        f"--dashboard-agent-grpc-port={_free_port()}",
        f"--runtime-env-agent-port={_free_port()}",
        f"--metrics-export-port={_free_port()}",
    ]


def multinode_config(http_port: int, grpc_port: int) -> dict[str, Any]:
    """deploy/ray/local-simulated.yaml with its own ports, replica-0 and every control
    application pinned to the head (custom resource `head`), replica-1 to node 2 (`node2`)."""
    config = copy.deepcopy(mesh.load_config(mesh.CONFIGS["simulated"]))
    config["http_options"] = {"host": "127.0.0.1", "port": http_port}
    config = mesh.with_serve_grpc_proxy(config, grpc_port)  # the sampler asks replicas there
    config["logging_config"] = {"log_level": "WARNING", "enable_access_log": False}
    for app in config["applications"]:
        name = app["name"]
        if name.startswith("replica-"):
            app["args"]["step_time_scale"] = 0.05
            node = "head" if name == "replica-0" else "node2"
            actor = {"num_cpus": 0.5, "resources": {node: 1}}
            app["deployments"] = [{"name": "ReplicaDeployment", "ray_actor_options": actor}]
        else:
            actor = {"num_cpus": 0.1, "resources": {"head": 1}}
            app["deployments"] = [{"name": CONTROL[name], "ray_actor_options": actor}]
        if name == "scheduler":
            # round-robin spreads a light load over both replicas (qlm would keep it on one),
            # so requests are in flight on node 2 when it dies
            app["args"]["policy"] = "round-robin"
        if name == "ingress":  # the ingress's own door: a port of this cluster's, never one a
            # mesh beside it holds (SO_REUSEPORT would let these replicas join that mesh's door)
            app["args"]["front_door"] = {"port": _free_port()}
            app["args"]["grpc_door"] = {"port": _free_port()}
    return config


def _app_statuses(cluster: Cluster) -> dict[str, str]:
    out = cluster.run("serve", "status", "--address", cluster.dashboard, timeout=60)
    data = yaml.safe_load(out) or {}
    apps = data.get("applications") or {}
    return {name: str(app.get("status")) for name, app in apps.items()}


def _wait_running(cluster: Cluster) -> dict[str, str]:
    want = {a["name"] for a in cluster.config["applications"]}
    deadline = time.monotonic() + DEPLOY_TIMEOUT_S
    statuses: dict[str, str] = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            statuses = _app_statuses(cluster)
            if want <= set(statuses) and all(statuses[n] == "RUNNING" for n in want):
                return statuses
        time.sleep(2)
    detail = ""
    with contextlib.suppress(Exception):
        detail = cluster.run("serve", "status", "--address", cluster.dashboard, timeout=60)
    raise AssertionError(f"applications not RUNNING in {DEPLOY_TIMEOUT_S:.0f} s: {detail}")


def _wait_routes(cluster: Cluster, timeout_s: float = 60.0) -> None:
    want = {a["route_prefix"] for a in cluster.config["applications"]}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError, ValueError):
            routes = httpx.get(f"{cluster.http}/-/routes", timeout=5).json()
            if isinstance(routes, dict) and want <= set(routes):
                return
        time.sleep(0.5)
    raise AssertionError(f"Serve's proxy did not publish routes {sorted(want)}")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    temp_dir = tempfile.mkdtemp(prefix="slomesh-mn-", dir="/tmp")
    http_port = 8200 if _port_free(8200) else _free_port()
    grpc_port = 9200 if _port_free(9200) else _free_port()
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(32),
        "SLOMESH_MESH_TOKEN": secrets.token_hex(32),
        "SERVE_SOCKET_REUSE_PORT_ENABLED": "0",
        "RAY_USAGE_STATS_ENABLED": "0",
        # a real multi-node cluster: the session's embedded mesh turned Ray's single-machine
        # mode on in this process's environment (mesh.loopback_node)
        ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR: "1",
    }
    env.pop("RAY_ADDRESS", None)
    c = Cluster(temp_dir, env, _free_port(), _free_port(), http_port, grpc_port)
    store = str(200 * 1024 * 1024)
    try:
        c.run(
            "ray", "start", "--head", "--node-ip-address=127.0.0.1",
            f"--temp-dir={temp_dir}", f"--port={c.gcs_port}",
            "--include-dashboard=true", "--dashboard-host=127.0.0.1",
            f"--dashboard-port={c.dashboard_port}",
            f"--ray-client-server-port={_free_port()}",
            "--num-cpus=3", '--resources={"head": 100}',
            f"--object-store-memory={store}", "--disable-usage-stats",
            *_node_ports(),
        )  # fmt: skip
        before = _raylets(temp_dir)
        c.run(
            "ray", "start", f"--address=127.0.0.1:{c.gcs_port}", "--node-ip-address=127.0.0.1",
            f"--temp-dir={temp_dir}", "--num-cpus=2", '--resources={"node2": 100}',
            f"--object-store-memory={store}", "--disable-usage-stats",
            *_node_ports(),
        )  # fmt: skip
        node2 = _raylets(temp_dir) - before
        assert len(node2) == 1, f"node 2's raylet not found: {node2}"
        c.node2_raylet = node2.pop()
        c.config = multinode_config(http_port, grpc_port)
        c.config_file = Path(temp_dir) / "serve-multinode.yaml"
        c.config_file.write_text(yaml.safe_dump(c.config, sort_keys=False))
        t0 = time.monotonic()
        c.run("serve", "deploy", str(c.config_file), "--address", c.dashboard)
        statuses = _wait_running(c)
        _wait_routes(c)
        print(f"\n[multinode] deployed in {time.monotonic() - t0:.1f} s: {statuses}")
        yield c
    except BaseException:
        print("\n".join(c.log[-6:]))
        raise
    finally:
        pids = _ours(temp_dir)
        _kill(pids, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _ours(temp_dir):
            time.sleep(0.5)
        _kill(_ours(temp_dir) | pids)
        shutil.rmtree(temp_dir, ignore_errors=True)


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

    def kill_node2() -> None:
        assert cluster.node2_raylet is not None
        pids = _tree({cluster.node2_raylet})
        _kill(pids)
        cluster.log.append(f"killed node 2: {sorted(pids)}")

    with ReplicaSampler(cluster) as sampler:
        outcomes, kill_s, tail = asyncio.run(_load(cluster, kill_node2))
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
        print("[multinode] serve status after the kill:", _app_statuses(cluster))

    assert before and all(o.ok for o in before), report["before_kill"]
    assert all(served.values()), f"both replicas serve before the kill: {served}"
    hangs = [o for o in outcomes + tail if o.transport_error == "hang"]
    assert not hangs, f"{len(hangs)} requests unanswered or stalled for {ANSWER_S} s: {hangs[:3]}"
    unclear = [o.kind for o in during + after if not o.ok and not o.clear_error]
    assert not unclear, f"failures without an HTTP error status or error event: {unclear}"
    assert recovery is not None and recovery <= RECOVERY_LIMIT_S, report["recovery_s"]
    assert all(o.ok for o in tail), report[f"tail_{CONSECUTIVE_OK}_sequential"]
