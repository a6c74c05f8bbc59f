"""`qlm-hetero`: QLM paper Fig. 15 - QLM on a mix of A10 and A100 GPUs.

Paper: WA on clusters with varying A10 : A100 ratios. The RWT estimator knows (from profiling)
that an A10 drains its queue ~3x slower, so QLM's global scheduler sends it proportionally fewer
requests; a round-robin ("random") assignment loads all GPUs equally and the A10 queues fall
behind. QLM's gain over round-robin is largest for mixed clusters (20-50% A10) and small for
homogeneous ones. Here: a WA-shaped workload (interactive / batch-1 / batch-2 at 50/30/20%) of
one model that fits both GPUs at TP 1, Mistral-7B (14.5 GB of weights; an A10 keeps ~38K KV
tokens, an A100 ~420K), on 4 instances with 0, 1, 2, 3 or 4 of them A10-24GB and the rest
A100-80GB. The total rate follows the cluster's capacity: `rate_per_a100` x the sum of instance
weights, a weight being the instance's decode tokens/s with its KV cache full of 1K-token
contexts relative to an A100 (roofline profiles; an A10 weighs ~0.16). Compared: `qlm` and
`qlm-no-balance` (groups pinned round-robin to instances, each queue still ordered by QLM).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from shared.profiles.defaults import default_profile
from shared.workloads import StreamSpec, WorkloadSpec, generate
from slomesh.bench.experiments.base import Experiment, ExperimentArgs, ExperimentOutput, thin
from slomesh.bench.experiments.helpers import (
    Panel,
    Point,
    attainment_cell,
    detail_table,
    pct,
    pivot,
    point_json,
    progress,
    rps,
    run_stacks,
    save_figure,
    series_by_policy,
    throughput_cell,
)
from slomesh.sim.cluster import ClusterSpec, InstanceSpec

A10, A100 = "A10-24GB", "A100-80GB"
MODEL = "mistral-7b"
CONTEXT_TOKENS = 1024
STREAM_SHARES = {"interactive": 0.5, "batch-1": 0.3, "batch-2": 0.2}


def capacity_weight(gpu: str, model: str = MODEL, reference: str = A100) -> float:
    """Decode tokens/s of `model` on `gpu` at a full KV cache of 1K-token contexts, relative to
    the same on `reference` (both at the smallest tensor-parallel degree that fits)."""

    def tokens_s(g: str) -> float:
        p = default_profile(g, model)
        batch = max(1, min(256, p.kv_capacity_tokens // CONTEXT_TOKENS))
        return batch / p.decode_time_s(CONTEXT_TOKENS, batch)

    return tokens_s(gpu) / tokens_s(reference)


def mixed_cluster(a10: int, total: int) -> ClusterSpec:
    kinds = [(A10, a10), (A100, total - a10)]
    return ClusterSpec(
        instances=[InstanceSpec(gpu=g, models=[MODEL], count=n) for g, n in kinds if n > 0]
    )


def workload(rate_rps: float, requests: int) -> WorkloadSpec:
    streams = [
        StreamSpec(name=name, slo_class=name, models=[MODEL], rate_rps=share * rate_rps)
        for name, share in STREAM_SHARES.items()
    ]
    return WorkloadSpec(streams=streams, requests=requests)


class QLMHetero(Experiment):
    """Fig. 15: throughput and attainment vs the A10 share of a 4-instance cluster."""

    name: ClassVar[str] = "qlm-hetero"
    figure: ClassVar[str] = "Fig. 15"
    description: ClassVar[str] = (
        "Mistral-7B WA-shaped workload on 4 instances, 0-100% A10-24GB (rest A100-80GB), rate "
        "scaled to capacity; qlm vs qlm-no-balance (round-robin groups)"
    )
    default_requests: ClassVar[int] = 2000
    instances: ClassVar[int] = 4
    a10_counts: ClassVar[tuple[int, ...]] = (0, 1, 2, 3, 4)
    rate_per_a100: ClassVar[float] = 5.0
    """Total req/s per A100-equivalent of capacity."""
    stacks: ClassVar[tuple[str, ...]] = ("qlm", "qlm-no-balance")

    def execute(self, args: ExperimentArgs, out_dir: Path) -> ExperimentOutput:
        counts = thin(self.a10_counts, args.max_points)
        n = self.requests(args)
        w10 = capacity_weight(A10)
        points: list[Point] = []
        with progress(args.progress, n * len(counts) * len(self.stacks), self.name) as tick:
            for a10 in counts:
                capacity = a10 * w10 + (self.instances - a10)
                rate = self.rate_per_a100 * capacity
                requests = generate(workload(rate, n), args.seed)
                runs = run_stacks(mixed_cluster(a10, self.instances), self.stacks, requests, tick)
                share = 100.0 * a10 / self.instances
                extra: dict[str, Any] = {"a10": a10, "a100": self.instances - a10, "rate_rps": rate}
                points += [Point(share, p, r.summary, extra) for p, r in runs.items()]
        x_label = "A10 %"
        rates = {f"{p.x:g}": p.extra["rate_rps"] for p in points}
        return ExperimentOutput(
            results={
                "model": MODEL,
                "instances": self.instances,
                "a10_weight": w10,
                "rate_per_a100_rps": self.rate_per_a100,
                "stream_shares": STREAM_SHARES,
                "points": [point_json(p) for p in points],
            },
            tables=[
                ("SLO attainment % by A10 share", pivot(points, x_label, attainment_cell)),
                ("Throughput r/s by A10 share", pivot(points, x_label, throughput_cell)),
                ("Detail", detail_table(points, x_label)),
            ],
            figures=[self._figure(points, out_dir)],
            notes=[
                f"{self.instances} instances of {MODEL}; A10 capacity weight {w10:.3f} of an A100",
                "total rate by A10 %: "
                + ", ".join(f"{k}% {v:.2f} req/s" for k, v in rates.items()),
            ],
        )

    def _figure(self, points: list[Point], out_dir: Path) -> Path:
        xs, att = series_by_policy(points, pct)
        _, thr = series_by_policy(points, rps)
        xlabel = f"A10 share of {self.instances} instances (%)"
        return save_figure(
            out_dir / f"{self.name}.png",
            [
                Panel("line", "Request throughput", xlabel, "requests / s", xs, thr),
                Panel("line", "SLO attainment", xlabel, "SLO met %", xs, att, (0.0, 105.0)),
            ],
            f"{self.name} ({self.figure}): hardware heterogeneity, qlm vs round-robin groups",
        )
