"""Scheduler shards in the live mesh: a shard added while the mesh serves is found by the first
one and the ingresses and takes its share of the replicas; killed under load it loses no
request (its queued requests are admitted again by the other shard, streams in flight go on,
the other shard takes its replicas over); removed, it gives its replicas back."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import ray

from shared.rpc.slomesh.v1 import scheduler_pb2
from slomesh.launch.mesh import _builder
from slomesh.launch.shards import shard_app
from tests.integration.conftest import GOLD_KEY
from tests.integration.handles import HandleStub

MODEL = "llama-3.1-8b"
NEW = "scheduler-1"
REPLICAS = 3  # replica-0 and replica-1 (simulated), replica-2 (vLLM, the tiny model)


def _health(shard: str) -> scheduler_pb2.HealthReply:
    reply: scheduler_pb2.HealthReply = HandleStub(shard).Health(scheduler_pb2.HealthQuery())
    return reply


def _ready(shard: str) -> int:
    return sum(r.ready for r in _health(shard).replicas)


def _wait(done: Callable[[], bool], rounds: int = 240) -> None:
    """Poll `done` (at most `rounds` times, 0.5 s apart); the caller asserts the state."""
    for _ in range(rounds):
        try:
            if done():
                return
        except Exception:  # a shard starting or restarting: ask again
            pass
        time.sleep(0.5)


def _one(url: str, k: int) -> str:
    # QLM's interactive class (TTFT 20 s): refusals for latency on a loaded host are not the
    # shards' doing
    body = {
        "model": MODEL,
        "prompt": f"shard {k}",
        "max_tokens": 16,
        "stream": True,
        "slo": "interactive",
    }
    headers = {"Authorization": f"Bearer {GOLD_KEY}"}
    try:
        with httpx.stream("POST", url, json=body, headers=headers, timeout=60) as r:
            if r.status_code != 200:
                return f"http-{r.status_code}-{r.headers.get('x-slomesh-drop-reason', '')}"
            text = "".join(r.iter_text())
    except httpx.HTTPError as err:
        return f"client-{type(err).__name__}"
    if '"error"' in text:
        return "error-event"
    return "done" if "data: [DONE]" in text else "cut"


def _kill(application: str) -> None:
    prefix = f"SERVE_REPLICA::{application}#"
    actor = next(
        a for a in ray.util.list_named_actors(all_namespaces=True) if a["name"].startswith(prefix)
    )
    ray.kill(ray.get_actor(actor["name"], namespace=actor["namespace"]), no_restart=True)


def test_a_shard_added_killed_and_removed_while_serving_loses_no_request(
    live_mesh: dict[str, Any],
) -> None:
    from ray import serve

    base = next(a for a in live_mesh["config"]["applications"] if a["name"] == "scheduler")
    app = shard_app(base, NEW, ["scheduler", NEW])
    serve.run(
        _builder(app["import_path"])(app["args"]),
        name=NEW,
        route_prefix=app["route_prefix"],
        blocking=False,
    )
    try:
        _wait(lambda: list(_health("scheduler").shards) == ["scheduler", NEW])
        _wait(lambda: _ready("scheduler") + _ready(NEW) == REPLICAS)
        assert list(_health("scheduler").shards) == ["scheduler", NEW]
        assert _ready("scheduler") + _ready(NEW) == REPLICAS  # divided, each replica once
        assert _ready(NEW) >= 1
        time.sleep(1.0)  # the ingresses' shard tables poll every 0.5 s
        url = f"{live_mesh['openai']}/completions"
        # two at a time: within one shard's seats (max_in_flight_per_replica 4 on its one
        # replica of the model), so a refusal would be the shards', not the load's
        with ThreadPoolExecutor(2) as pool:
            futures = [pool.submit(_one, url, k) for k in range(8)]
            _kill(NEW)  # while requests are queued and streaming on both shards
            futures += [pool.submit(_one, url, k) for k in range(8, 30)]
            outcomes = [f.result() for f in futures]
        assert outcomes == ["done"] * len(outcomes)
        # the first shard served the dead one's replicas meanwhile, or Serve restarted it and
        # the two divide them again: every replica has one owner either way
        _wait(lambda: sum(_ready(s) for s in _health("scheduler").shards) == REPLICAS)
        assert sum(_ready(s) for s in _health("scheduler").shards) == REPLICAS
    finally:
        serve.delete(NEW)
    # a restart of the killed shard may come up (and call its peer) just before the delete
    # stops it: the first shard marks it down at its next exchange
    alone = lambda: list(_health("scheduler").shards) == ["scheduler"]  # noqa: E731
    _wait(lambda: alone() and _ready("scheduler") == REPLICAS)
    assert alone()
    assert _ready("scheduler") == REPLICAS
    assert _one(f"{live_mesh['openai']}/completions", 99) == "done"
