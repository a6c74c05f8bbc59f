"""Scheduler shards on the live mesh: the admission ladder and the scheduler tier's CPU.

The mesh of `slomesh bench-mesh` (zero-time simulated engines, so what is measured is the
mesh), split into N scheduler shards (`slomesh up --shards N`). For each rate of the ladder:
open-loop Poisson load for `seconds` (slomesh/bench/open_loop.py), p50/p99 time to first token
(= admission latency with engines that take no time), errors, and the CPU seconds every Ray
process spent meanwhile (psutil over the process tree of this driver, which started Ray).
CPU per admission = the scheduler shards' CPU seconds over the requests served (each admitted
once: Admit, or Place on a lease credit, plus its Report; a request refused at the ingress
costs the scheduler nothing). Before the ladder, the shards'
CPU while the mesh is idle gives the cost of the usage exchange (and the replica probes) per
second, which the simulator's shard model takes (slomesh/sim/shards.py).
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


def _staleness(shards: int) -> list[float]:
    """Each shard's largest usage staleness since it started (its Health), seconds."""
    from ray import serve

    from shared.rpc.slomesh.v1 import scheduler_pb2
    from slomesh.launch.shards import shard_names

    out = []
    for name in shard_names(shards):
        call = serve.get_app_handle(name).Health.remote(
            scheduler_pb2.HealthQuery(), trace_headers={}
        )
        out.append(float(call.result(timeout_s=10).max_usage_staleness_s))
    return out


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
            before = tree_cpu(me)
            load = ladder(url, model, MESH_PROMPT, [rate], seconds, seed, 0)
            step = asyncio.run(load)[0]
            used = tree_cpu(me).minus(before)
            sched = _scheduler_cpu(used.by_process)
            step["scheduler_cpu_s"] = sched
            step["scheduler_cpu_per_admission_ms"] = 1e3 * sched / max(int(step["n"]), 1)
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
