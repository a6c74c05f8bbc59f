"""Scheduler shards in the simulator: control-plane capacity and fairness with 1, 2 and 4 shards.

- Capacity: short chat turns (32 prompt tokens, 4 output tokens, one tenant) on a cluster
  whose engines are not the limit (`CAPACITY_INSTANCES` x H100), so what limits the rate is
  the shards' CPU (slomesh/sim/shards.py: each shard one server spending the measured cost per
  admission, per report and per usage exchange). The capacity is the highest rate at which the
  99th percentile of the admission delay (a decision's time minus its arrival) stays within
  `ADMISSION_P99_MS` (what `slomesh bench-mesh` calls admission capacity live), found by the
  capacity search (slomesh/bench/capacity.py: bracket, then bisect to 5%).
- Fairness: tenants-skew (two tenants, one sending 5x the other's tokens, 2x overload) on twice
  its cluster at twice its rate, so each of 2 shards owns what the scenario's one scheduler had;
  Jain's index of the tenants' service (shared/metrics/summary.py) with 1 and 2 shards.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from shared.domain import Request
from shared.metrics.summary import summarize
from shared.workloads import LengthSpec, StreamSpec, WorkloadSpec, generate
from slomesh.bench.capacity import search_capacity
from slomesh.bench.scenarios import SCENARIOS
from slomesh.sim.cluster import ClusterSpec, InstanceSpec
from slomesh.sim.shards import ShardedSimulator, ShardModel
from slomesh.stacks import STACKS

ADMISSION_P99_MS = 50.0
"""The admission delay the capacity keeps at its 99th percentile, milliseconds."""
CAPACITY_INSTANCES = 16
"""H100s serving the capacity workload: far more than the shards' CPU can feed."""
CAPACITY_REQUESTS = 3000
"""Requests per capacity probe."""
STACK = "slomesh"
"""The flagship stack runs in every shard (QLM's planning whole within a shard)."""


def capacity_workload(rate_rps: float) -> WorkloadSpec:
    lengths = LengthSpec(source="fixed", input_tokens=32, output_tokens=4, max_tokens=16)
    stream = StreamSpec(
        name="chat",
        slo_class="interactive",
        models=["llama-3.1-8b"],
        rate_rps=rate_rps,
        lengths=lengths,
    )
    return WorkloadSpec(streams=[stream], requests=CAPACITY_REQUESTS)


CAPACITY_CLUSTER = ClusterSpec(
    instances=[InstanceSpec(gpu="H100-80GB", models=["llama-3.1-8b"], count=CAPACITY_INSTANCES)]
)


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] if ordered else 0.0


@dataclass(frozen=True)
class CapacityResult:
    shards: int
    capacity_rps: float
    probes: list[tuple[float, float]]
    """(rate, share of admissions within ADMISSION_P99_MS) of each probe."""


def _run(requests: list[Request], model: ShardModel, cluster: ClusterSpec) -> ShardedSimulator:
    sim = ShardedSimulator(cluster, STACKS.create(STACK), requests, model)
    sim.result = sim.run()  # type: ignore[attr-defined]
    return sim


def within_share(model: ShardModel, rate: float, seed: int) -> float:
    """Share of a probe's admissions decided within ADMISSION_P99_MS of arrival."""
    requests = generate(capacity_workload(rate), seed)
    sim = _run(requests, model, CAPACITY_CLUSTER)
    delays = sim.cpu.admission_delays_s
    return sum(d * 1e3 <= ADMISSION_P99_MS for d in delays) / max(len(delays), 1)


def capacity(model: ShardModel, seed: int = 0) -> CapacityResult:
    """The highest rate whose p99 admission delay is within ADMISSION_P99_MS."""
    start = 0.5 * model.shards * 1e3 / max(model.admit_cost_ms + model.report_cost_ms, 1e-3)
    found = search_capacity(lambda r: within_share(model, r, seed), start, 0.99, rel_tol=0.03)
    return CapacityResult(model.shards, found.capacity_rps, list(found.probes))


def fairness(model: ShardModel, seeds: list[int], requests: int) -> dict[str, Any]:
    """Jain's index, attainment and the light tenant's attainment on tenants-skew (doubled)."""
    sc = SCENARIOS.create("tenants-skew")
    cluster = sc.cluster.model_copy(
        update={
            "instances": [i.model_copy(update={"count": i.count * 2}) for i in sc.cluster.instances]
        }
    )
    workload = sc.workload.model_copy(update={"requests": requests})
    workload = workload.with_total_rate(2 * workload.total_rate_rps)
    jains, atts, lights, stale = [], [], [], []
    for seed in seeds:
        sim = _run(generate(workload, seed), model, cluster)
        summary = summarize(sim.result)  # type: ignore[attr-defined]
        jains.append(summary.jain_index)
        atts.append(summary.slo_attainment)
        lights.append(summary.attainment_by_tenant.get("light", float("nan")))
        stale.append(sim.cpu.max_staleness_s)
    return {
        "shards": model.shards,
        "jain_by_seed": jains,
        "jain_median": statistics.median(jains),
        "attainment_median": statistics.median(atts),
        "light_attainment_median": statistics.median(lights),
        "max_usage_staleness_s": max(stale),
    }
