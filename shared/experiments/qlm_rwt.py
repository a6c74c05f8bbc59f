"""`qlm-rwt`: QLM paper Fig. 18 - accuracy (R²) of the request waiting time (RWT) estimator.

Paper: R² of estimated vs measured waiting time grows with the number of request groups queued
and reaches 0.99 with four groups; with short queues the estimates are conservative (high). Here:
`qlm` on the `qlm-wa` scenario at 6 req/s in all (default 4.5) so queues are deep. Every arrival
that gets a prediction is scored when an instance pulls it (measured wait = pull time - arrival):
the point (mean) prediction the estimator is judged by, and the p99 prediction the scheduler acts
on (biased upward by design). R² is binned by groups queued up to and including the request's own
group at prediction time (1, 2-3, 4-7, 8+), and split by SLO class.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from services.scheduler.qlm.rwt_accuracy import RWTAccuracy, WaitPair, r2_score
from services.scheduler.stacks import STACKS
from shared.experiments.base import Experiment, ExperimentArgs, ExperimentOutput
from shared.experiments.helpers import Panel, progress, run_stack, save_figure, with_requests
from shared.report.table import fmt_num, markdown_table
from shared.scenarios import SCENARIOS
from shared.workloads import generate

EDGES = (1, 2, 4, 8)
MAX_SCATTER = 4000


def _r2(v: float | None) -> str:
    return fmt_num(v, 3)


def by_class(
    pairs: tuple[WaitPair, ...], cls: dict[str, str]
) -> list[tuple[str, int, float | None]]:
    """(class, n, R²) of `pairs` grouped by the SLO class of their request."""
    out = []
    for name in sorted(set(cls.values())):
        sel = [p for p in pairs if cls.get(p.request_id) == name]
        r2 = r2_score([p.predicted_wait_s for p in sel], [p.measured_wait_s for p in sel])
        out.append((name, len(sel), r2))
    return out


class QLMRWT(Experiment):
    """Fig. 18: R² of the RWT estimator by groups queued, point and p99 predictions."""

    name: ClassVar[str] = "qlm-rwt"
    figure: ClassVar[str] = "Fig. 18"
    description: ClassVar[str] = (
        "qlm on qlm-wa at 6 req/s (deep queues): R² of predicted vs measured waits by groups "
        "queued, point and p99 predictions"
    )
    default_requests: ClassVar[int] = 3500
    scenario: ClassVar[str] = "qlm-wa"
    rate_rps: ClassVar[float] = 6.0

    def execute(self, args: ExperimentArgs, out_dir: Path) -> ExperimentOutput:
        sc = with_requests(SCENARIOS.create(self.scenario), self.requests(args))
        workload = sc.workload.with_total_rate(self.rate_rps)
        requests = generate(workload, args.seed)
        with progress(args.progress, len(requests), self.name) as tick:
            run = run_stack(sc.cluster, STACKS.create("qlm"), requests, tick)
        qlm = run.qlm
        assert qlm is not None, "the qlm stack runs a QLMPolicy"
        cls = {r.request_id: r.slo.class_name for r in requests}
        scores = {"point": qlm.accuracy, "p99": qlm.accuracy_quantile}
        results: dict[str, Any] = {"scenario": self.scenario, "rate_rps": self.rate_rps}
        results["attainment"] = run.summary.slo_attainment
        results["throughput_rps"] = run.summary.throughput_rps
        results["evictions"] = run.summary.evictions
        rows: list[list[str]] = []
        for kind, acc in scores.items():
            binned = acc.r2_by(EDGES, key="groups_queued")
            classes = by_class(acc.pairs(), cls)
            results[kind] = {
                "pairs": len(acc),
                "r2": acc.r2(),
                "by_groups_queued": [{"groups": g, "n": n, "r2": r2} for g, n, r2 in binned],
                "by_class": [{"class": c, "n": n, "r2": r2} for c, n, r2 in classes],
            }
            rows.append([kind, "all", str(len(acc)), _r2(acc.r2())])
            rows += [[kind, f"groups {g}", str(n), _r2(r2)] for g, n, r2 in binned]
            rows += [[kind, f"class {c}", str(n), _r2(r2)] for c, n, r2 in classes]
        table = markdown_table(["prediction", "subset", "pairs", "R²"], rows, left=(0, 1))
        return ExperimentOutput(
            results=results,
            tables=[("R² of predicted vs measured wait", table)],
            figures=[self._figure(scores, out_dir)],
            notes=[
                f"qlm on {self.scenario} at {self.rate_rps:g} req/s: SLO attainment "
                f"{100 * run.summary.slo_attainment:.1f}%, {run.summary.evictions} evictions",
                "measured wait: arrival to pull into an engine; predicted at arrival",
            ],
        )

    def _figure(self, scores: dict[str, RWTAccuracy], out_dir: Path) -> Path:
        labels = [g for g, _, _ in scores["point"].r2_by(EDGES)]
        bars: dict[str, list[float | None]] = {
            kind: [r2 for _, _, r2 in acc.r2_by(EDGES)] for kind, acc in scores.items()
        }
        pairs = scores["point"].pairs()
        step = max(1, len(pairs) // MAX_SCATTER)
        sample = pairs[::step]
        return save_figure(
            out_dir / f"{self.name}.png",
            [
                Panel(
                    "bar", "R² by groups queued", "groups queued", "R²", labels, bars, (-1, 1.05)
                ),
                Panel(
                    "scatter",
                    "Point prediction vs measured wait",
                    "predicted wait (s)",
                    "measured wait (s)",
                    [p.predicted_wait_s for p in sample],
                    {"requests": [p.measured_wait_s for p in sample]},
                ),
            ],
            f"{self.name} ({self.figure}): RWT estimator, {self.scenario} at {self.rate_rps:g} r/s",
        )
