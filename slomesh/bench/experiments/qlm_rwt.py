"""`qlm-rwt`: QLM paper Fig. 18 - accuracy (R²) of the RWT estimator vs queue size.

The paper scores the estimator on queues of a given size: requests wait, nothing overtakes them,
and the group's output distribution comes from workload profiling. Here: a burst of N batch-2
requests (1 h SLO: none is rejected) arrives at 100 req/s on the qlm-wa cluster (1 or 2
instances); the length predictor is first fitted on 2,000 completions of the same workload (seed
+ 1: the profiling run); right after the last arrival every queued request's wait is predicted
from the current virtual-queue order (`QLMConfig.rwt_snapshot_s`; re-clustering is off from then
on); measured wait = when an instance pulled it - its arrival. Scored: R² (against measured =
predicted) over all requests of a run, and over those with >= 4 groups queued ahead of or at
them, for growing N (more groups). With 2 instances the queues are re-balanced and an idle
instance serves another queue's head after the snapshot, which no per-queue estimate foresees.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from services.scheduler.core.qlm.policy import QLMPolicy
from services.scheduler.core.qlm.rwt_accuracy import WaitPair, r2_score
from shared.report.table import fmt_num, markdown_table
from shared.workloads import WorkloadSpec, generate
from slomesh.bench.experiments.base import Experiment, ExperimentArgs, ExperimentOutput, thin
from slomesh.bench.experiments.helpers import Panel, save_figure
from slomesh.bench.scenarios import SCENARIOS
from slomesh.sim.simulator import Simulator
from slomesh.stacks import stack as qlm_stack

BURST_RPS = 100.0
PROFILING_REQUESTS = 2000
SIZES = (128, 256, 512, 1024, 2048)
INSTANCES = (1, 2)


def _r2(pairs: list[WaitPair]) -> float | None:
    return r2_score([p.predicted_wait_s for p in pairs], [p.measured_wait_s for p in pairs])


class QLMRWT(Experiment):
    """Fig. 18: R² of the RWT estimator on draining queues of growing size."""

    name: ClassVar[str] = "qlm-rwt"
    figure: ClassVar[str] = "Fig. 18"
    description: ClassVar[str] = (
        "bursts of N batch-2 requests on 1 or 2 A100 instances, predictor fitted by a profiling "
        "run; R² of predicted vs measured waits (all, and >= 4 groups queued) vs queue size"
    )
    default_requests: ClassVar[int] = max(SIZES)

    def execute(self, args: ExperimentArgs, out_dir: Path) -> ExperimentOutput:
        sc = SCENARIOS.create("qlm-wa")
        stream = next(s for s in sc.workload.streams if s.name == "batch-2")
        stream = stream.model_copy(update={"rate_rps": BURST_RPS})
        sizes = [n for n in SIZES if n <= self.requests(args)] or [self.requests(args)]
        sizes = thin(sizes, args.max_points)
        profiling = generate(
            WorkloadSpec(streams=[stream], requests=PROFILING_REQUESTS), args.seed + 1
        )
        rows: list[list[str]] = []
        points: list[dict[str, Any]] = []
        series: dict[str, list[float | None]] = {}
        for inst in INSTANCES:
            for n in sizes:
                requests = generate(WorkloadSpec(streams=[stream], requests=n), args.seed)
                snap = requests[-1].arrival_s + 1e-3
                stack = qlm_stack(
                    "qlm", {"rwt_snapshot_s": snap, "grouping": {"recluster_interval_s": 1e9}}
                )
                sim = Simulator(sc.cluster.with_instances(inst), stack, requests)
                policy = sim.global_policy
                assert isinstance(policy, QLMPolicy)
                for r in profiling:  # workload profiling: μ_o, σ_o known before the burst
                    policy.lengths.observe(r, r.output_tokens_to_generate)
                sim.run()
                pairs = [p for p in policy.accuracy.pairs()]
                deep = [p for p in pairs if p.groups_queued >= 4]
                groups = max((p.groups_queued for p in pairs), default=0)
                r2_all, r2_deep = _r2(pairs), _r2(deep)
                points.append(
                    {
                        "instances": inst,
                        "requests": n,
                        "max_groups_queued": groups,
                        "pairs": len(pairs),
                        "r2": r2_all,
                        "pairs_4_groups": len(deep),
                        "r2_4_groups": r2_deep,
                    }
                )
                series.setdefault(f"{inst} instance(s), all", []).append(r2_all)
                series.setdefault(f"{inst} instance(s), >= 4 groups", []).append(r2_deep)
                rows.append(
                    [
                        str(inst),
                        str(n),
                        str(groups),
                        str(len(pairs)),
                        fmt_num(r2_all, 3),
                        str(len(deep)),
                        fmt_num(r2_deep, 3),
                    ]
                )
        headers = [
            "instances",
            "burst",
            "max groups queued",
            "pairs",
            "R²",
            "pairs >= 4 groups",
            "R² >= 4 groups",
        ]
        fig = save_figure(
            out_dir / f"{self.name}.png",
            [
                Panel(
                    "line",
                    "R² of predicted vs measured wait",
                    "requests in the burst",
                    "R²",
                    [float(n) for n in sizes],
                    series,
                    (0.0, 1.02),
                    logx=True,
                )
            ],
            f"{self.name} ({self.figure}): RWT estimator on draining queues",
        )
        return ExperimentOutput(
            results={"burst_rps": BURST_RPS, "sizes": sizes, "points": points},
            tables=[("R² by burst size", markdown_table(headers, rows, (0,)))],
            figures=[fig],
            notes=[f"predictor fitted on {PROFILING_REQUESTS} completions (seed + 1) first"],
        )
