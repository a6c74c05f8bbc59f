"""SLO-driven autoscaling on the live mesh: a replica pool scaled by Serve's autoscaler through
the scheduler's policy hook (services/replica/pool.py, services/scheduler/autoscale_hook.py).

Reuses the session mesh: the test adds a pool application serving its own model, redeploys the
scheduler and the ingress with that model added, and puts them back afterwards. The scheduler's
Θ per replica is set low (50 tokens/s) so that a load step a CPU machine can produce is more than
one replica's share; the policy decides every 2 s and scales down 20 s after its last scale-up.
"""

from __future__ import annotations

import copy
import importlib
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from ray import serve
from ray.serve.api import RunTarget

POOL = "pool-mistral"
MODEL = "mistral-7b"


def _deploy(apps: list[dict[str, Any]]) -> None:
    targets = []
    for app in apps:
        module, _, attr = app["import_path"].partition(":")
        build = getattr(importlib.import_module(module), attr)
        targets.append(
            RunTarget(
                target=build(app.get("args") or {}),
                name=app["name"],
                route_prefix=app.get("route_prefix"),
            )
        )
    serve.run_many(targets)


def _with_pool(config: dict[str, Any]) -> list[dict[str, Any]]:
    apps = {a["name"]: copy.deepcopy(a) for a in config["applications"]}
    sched = apps["scheduler"]["args"]
    sched["replicas"].append(
        {"application": POOL, "gpu": "A100-80GB", "model": MODEL, "pooled": True}
    )
    sched["autoscale_signal"] = {
        "replica_tokens_s": 50.0,
        "rate_window_s": 10.0,
        "startup_overhead_s": 2.0,
    }
    apps["ingress"]["args"]["models"].append({"name": MODEL, "max_model_len": 8192})
    pool = {
        "name": POOL,
        "route_prefix": f"/{POOL}",
        "import_path": "services.replica.pool:build_pool_app",
        "args": {
            "replica": {
                "application": POOL,
                "engine": "simulated",
                "model": MODEL,
                "step_time_scale": 0.02,
            },
            "min_replicas": 1,
            "max_replicas": 2,
            "autoscale": {"interval_s": 2.0, "slo": {"scale_down_delay_s": 20.0}},
        },
    }
    return [pool, apps["scheduler"], apps["ingress"]]


def _replicas(*states: str) -> int:
    """The pool's replicas in any of `states` (Serve's replica states)."""
    app = serve.status().applications.get(POOL)
    if app is None:
        return 0
    dep = app.deployments["ReplicaPool"]
    return sum(int(dep.replica_states.get(s, 0)) for s in states)


def _running() -> int:
    return _replicas("RUNNING")


def _added() -> int:
    """Replicas the policy asked for: running or still starting. A pool replica builds vLLM's
    serving layer for its model when it starts, which on a loaded 2-core host has taken more
    than a minute; the policy's decision is what this test checks, Serve's start-up time is not."""
    return _replicas("RUNNING", "STARTING")


def _load(http: str, stop: threading.Event, codes: list[int]) -> None:
    with httpx.Client(timeout=30) as client:
        while not stop.is_set():
            r = client.post(
                f"{http}/chat/completions",
                json={
                    "model": MODEL,
                    "messages": [{"role": "user", "content": "scale me"}],
                    "max_tokens": 16,
                    "slo": "interactive",
                },
            )
            codes.append(r.status_code)


def test_load_step_adds_a_pool_replica_and_removes_it_after(live_mesh: dict[str, Any]) -> None:
    original = [
        copy.deepcopy(a)
        for a in live_mesh["config"]["applications"]
        if a["name"] in ("scheduler", "ingress")
    ]
    _deploy(_with_pool(live_mesh["config"]))
    try:
        assert _running() == 1
        stop, codes = threading.Event(), []
        counts: list[tuple[float, int]] = []
        t0 = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            for _ in range(8):
                pool.submit(_load, live_mesh["http"], stop, codes)
            while time.monotonic() - t0 < 90 and max((n for _, n in counts), default=0) < 2:
                counts.append((time.monotonic() - t0, _added()))
                time.sleep(1.0)
            stop.set()
        peak = max(n for _, n in counts)
        answers = dict(Counter(codes))
        print(f"pool replicas running or starting under load (s, n): {counts}; answers {answers}")
        if peak != 2:  # what the policy saw: a read-only probe (no replica id, no pool)
            signal = serve.get_app_handle("scheduler").AutoscaleSignal.remote(MODEL).result()
            raise AssertionError(
                f"no scale-up under load: running or starting replicas over time {counts}; answers "
                f"{answers}; the scheduler's signal for {MODEL} after the load: {signal}"
            )
        assert codes.count(200) > 0, f"no request served: {sorted(set(codes))}"
        t1 = time.monotonic()  # the policy holds while a replica starts, then waits its delay
        while time.monotonic() - t1 < 240 and _added() != 1:
            time.sleep(1.0)
        assert _added() == 1, "the added replica was not removed after the load fell"
        print(f"back to 1 replica {time.monotonic() - t1:.0f} s after the load stopped")
    finally:
        serve.delete(POOL)
        _deploy(original)
