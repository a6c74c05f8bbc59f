"""`qlm-delta`: QLM paper Fig. 19 - impact of the request group size (δ) on QLM.

Paper: a group holds up to δ x the average batch size; small δ gives fine-grained decisions but
more groups for the global scheduler (overhead), large δ the reverse (coarse decisions, e.g.
imbalanced virtual queues). The paper picks δ = 4: nearly δ = 1's performance at low overhead.
Here: `qlm` with QLMConfig grouping.delta in {1, 2, 4, 8, 16} (split threshold 32·δ requests) on
the `qlm-wb` scenario with batch-1 at 4 req/s (batch-2 0.5), the top of the qlm-wb-rates sweep:
only there do queues get deep enough for δ to matter - at batch-1 1 req/s at most ~90 requests
queue in ~12 groups, no group outgrows 32 and every δ gives the same run. Reported: SLO
attainment, request throughput, solver calls and mean solve time per call (the ILP sees at most
`max_ilp_groups` = 8 groups and stops at its 0.1 s time limit, so the time per call hardly
depends on δ here; fewer, larger groups mean fewer calls).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from shared.report.table import fmt_num, markdown_table
from shared.workloads import generate
from slomesh.bench.experiments.base import Experiment, ExperimentArgs, ExperimentOutput, thin
from slomesh.bench.experiments.helpers import (
    DETAIL_HEADERS,
    Panel,
    Point,
    detail_cells,
    pct,
    point_json,
    progress,
    rps,
    run_stack,
    save_figure,
    series_by_policy,
    with_requests,
    with_stream_rate,
)
from slomesh.bench.scenarios import SCENARIOS
from slomesh.stacks import stack as qlm_stack


class QLMDelta(Experiment):
    """Fig. 19: attainment, throughput and solver time vs the group size factor δ."""

    name: ClassVar[str] = "qlm-delta"
    figure: ClassVar[str] = "Fig. 19"
    description: ClassVar[str] = (
        "qlm on qlm-wb (batch-1 4 req/s) with grouping δ in 1..16: SLO attainment, throughput "
        "and mean global-scheduler solve time"
    )
    default_requests: ClassVar[int] = 1000
    scenario: ClassVar[str] = "qlm-wb"
    stream_rate: ClassVar[tuple[str, float]] = ("batch-1", 4.0)
    deltas: ClassVar[tuple[int, ...]] = (1, 2, 4, 8, 16)

    def execute(self, args: ExperimentArgs, out_dir: Path) -> ExperimentOutput:
        sc = with_requests(SCENARIOS.create(self.scenario), self.requests(args))
        workload = with_stream_rate(sc.workload, *self.stream_rate)
        requests = generate(workload, args.seed)
        deltas = thin(self.deltas, args.max_points)
        points: list[Point] = []
        with progress(args.progress, len(requests) * len(deltas), self.name) as tick:
            for d in deltas:
                run = run_stack(
                    sc.cluster, qlm_stack("qlm", {"grouping": {"delta": d}}), requests, tick
                )
                qlm = run.qlm
                assert qlm is not None, "the qlm stack runs a QLMPolicy"
                st = qlm.scheduler.stats()
                extra = {
                    "delta": d,
                    "solves": st.solves,
                    "fallbacks": st.fallbacks,
                    "solver_total_s": st.total_solve_s,
                    "solve_mean_ms": 1e3 * st.mean_solve_s,
                    "replans": qlm.stats.replans,
                    "reclusters": qlm.stats.reclusters,
                }
                points.append(Point(float(d), "qlm", run.summary, extra))
        rows = [
            [
                str(p.extra["delta"]),
                *detail_cells(p.summary),
                str(p.extra["solves"]),
                fmt_num(p.extra["solve_mean_ms"], 1),
                fmt_num(p.extra["solver_total_s"], 2),
            ]
            for p in points
        ]
        headers = ["δ", *DETAIL_HEADERS, "solves", "mean solve ms", "solver total s"]
        rates = {s.name: s.rate_rps for s in workload.streams}
        return ExperimentOutput(
            results={
                "scenario": self.scenario,
                "stream_rates_rps": rates,
                "points": [point_json(p) for p in points],
            },
            tables=[("qlm by group size factor δ", markdown_table(headers, rows, left=(2,)))],
            figures=[self._figure(points, out_dir)],
            notes=[
                f"scenario {self.scenario}: "
                + ", ".join(f"{k} {v:g} req/s" for k, v in rates.items())
            ],
        )

    def _figure(self, points: list[Point], out_dir: Path) -> Path:
        xs, att = series_by_policy(points, pct)
        _, thr = series_by_policy(points, rps)
        solve = {"mean solve": [float(p.extra["solve_mean_ms"]) for p in points]}
        return save_figure(
            out_dir / f"{self.name}.png",
            [
                Panel("line", "SLO attainment", "δ", "SLO met %", xs, att, (0.0, 105.0), logx=True),
                Panel("line", "Request throughput", "δ", "requests / s", xs, thr, logx=True),
                Panel(
                    "line", "Global scheduler overhead", "δ", "ms per solve", xs, solve, logx=True
                ),
            ],
            f"{self.name} ({self.figure}): {self.scenario}, request group size δ",
        )
