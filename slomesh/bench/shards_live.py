"""Scheduler shards on the live mesh: the admission ladder and the scheduler tier's CPU.

The mesh of `slomesh bench-mesh` (zero-time simulated engines, so what is measured is the
mesh), split into N scheduler shards (`slomesh up --shards N`). For each rate of the ladder:
open-loop Poisson load for `seconds` (slomesh/bench/open_loop.py), p50/p99 time to first token
(= admission latency with engines that take no time), errors, and the CPU seconds every Ray
process spent meanwhile (psutil over the process tree of this driver, which started Ray).
CPU per admission = the scheduler shards' CPU seconds over the requests they admitted at that
rate (the sum of their Health's `admitted_total` after the step minus before: `Admit`, and
placements on lease credits, the fast path, counted apart as `fast_path`; requests refused
count in the CPU, not the denominator). A scheduler whose Health has no such count (older
code) is divided by the requests served instead (`denominator` says which). Before the
ladder, the shards' CPU while the mesh is idle gives the cost of the usage exchange (and the
replica probes) per second, which the simulator's shard model takes (slomesh/sim/shards.py).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from slomesh.bench.compare.cpu import tree_cpu
from slomesh.bench.open_loop import MESH_MODELS, MESH_PROMPT, ladder
from slomesh.launch import mesh
from slomesh.launch.shards import with_shards

SCHEDULER_TITLE = "ServeReplica:scheduler"
"""What the scheduler shards' Ray process titles contain (`ray::ServeReplica:scheduler-1:...`)."""
IDLE_S = 10.0
"""Seconds the idle mesh's CPU is measured for."""


def _scheduler_cpu(by_process: dict[str, float]) -> float:
    return sum(v for k, v in by_process.items() if SCHEDULER_TITLE in k)


def _health(shards: int) -> list[Any]:
    """Each shard's Health answer."""
    from ray import serve

    from shared.rpc.slomesh.v1 import scheduler_pb2
    from slomesh.launch.shards import shard_names

    out = []
    for name in shard_names(shards):
        call = serve.get_app_handle(name).Health.remote(
            scheduler_pb2.HealthQuery(), trace_headers={}
        )
        out.append(call.result(timeout_s=10))
    return out


def _staleness(shards: int) -> list[float]:
    """Each shard's largest usage staleness since it started (its Health), seconds."""
    return [float(h.max_usage_staleness_s) for h in _health(shards)]


def _admitted(shards: int) -> tuple[int, int]:
    """Requests the shards admitted since they started (their Health), fast path included, and
    of them those placed on lease credits (the fast path)."""
    health = _health(shards)
    return (
        sum(int(getattr(h, "admitted_total", 0)) for h in health),
        sum(int(getattr(h, "fast_path_total", 0)) for h in health),
    )


def per_admission(step: dict[str, Any], sched_cpu_s: float, admitted: int) -> None:
    """Fill `step`'s admitted count and rate and the scheduler CPU per admission (the module
    docstring: over the admitted requests, else the served ones)."""
    served = int(step["n"])
    took_s = served / step["achieved_rps"] if step["achieved_rps"] > 0 else 0.0
    denominator = "admitted" if admitted > 0 else "served"
    count = admitted if admitted > 0 else served
    step["admitted"] = count
    step["admitted_rps"] = count / took_s if took_s > 0 else 0.0
    step["denominator"] = denominator
    step["scheduler_cpu_s"] = sched_cpu_s
    step["scheduler_cpu_per_admission_ms"] = 1e3 * sched_cpu_s / max(count, 1)


def run_ladder(
    config: dict[str, Any], shards: int, url: str, rates: list[float], seconds: float, seed: int
) -> dict[str, Any]:
    """Start the mesh with `shards` shards, measure idle and per-rate CPU, stop it."""
    split = with_shards(config, shards)
    mesh.start(split)
    me = os.getpid()
    model = MESH_MODELS["simulated"]
    try:
        asyncio.run(ladder(url, model, MESH_PROMPT, [min(rates)], 3.0, seed))  # warm
        before = tree_cpu(me)
        time.sleep(IDLE_S)
        idle = tree_cpu(me).minus(before)
        steps = []
        for rate in rates:
            admitted, fast = _admitted(shards)
            before = tree_cpu(me)
            load = ladder(url, model, MESH_PROMPT, [rate], seconds, seed, 0)
            step = asyncio.run(load)[0]
            used = tree_cpu(me).minus(before)
            after, fast_after = _admitted(shards)
            per_admission(step, _scheduler_cpu(used.by_process), after - admitted)
            step["fast_path"] = fast_after - fast
            step["mesh_cpu_s"] = used.outside_s
            steps.append(step)
        staleness = _staleness(shards)
    finally:
        mesh.stop(split)
    return {
        "shards": shards,
        "load_average": list(os.getloadavg()),
        "idle_scheduler_cpu_per_s": _scheduler_cpu(idle.by_process) / IDLE_S,
        "max_usage_staleness_s": staleness,
        "steps": steps,
    }
