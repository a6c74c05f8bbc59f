"""`qlm-solver`: QLM paper Fig. 20 - global scheduler overhead vs queue size.

Paper: solve time of the global scheduler's linear program against the number of queued
requests; the solver works on request groups, so large groups (an A100 serving a 7B model) keep a
400K-request queue at about 5 ms per request. Here: the seeded random problems of
`slomesh bench-solver` (slomesh/bench/solver_problems.py `random_problem`: 8 heterogeneous virtual
queues, 4 models, groups of random size, output length and deadline) for 1K-100K queued
requests in groups of 64 on average (half the default δ·avg_batch_size = 128 split threshold),
each problem planned by the ILP scheduler (QLM Eqs. 6-13 over its window of the most urgent
groups, the rest by the heuristic; default GlobalSchedulerConfig) and by the heuristic alone.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from services.scheduler.core.qlm.solvers.config import GlobalSchedulerConfig
from services.scheduler.core.qlm.solvers.global_scheduler import GlobalScheduler
from shared.report.table import fmt_num, markdown_table
from slomesh.bench.experiments.base import Experiment, ExperimentArgs, ExperimentOutput, thin
from slomesh.bench.experiments.helpers import Panel, save_figure
from slomesh.bench.solver_problems import random_problem

SOLVERS = ("ilp", "heuristic")


class QLMSolver(Experiment):
    """Fig. 20: median / p95 solve ms and ms per queued request vs queue size, ILP vs heuristic."""

    name: ClassVar[str] = "qlm-solver"
    figure: ClassVar[str] = "Fig. 20"
    description: ClassVar[str] = (
        "global scheduler on random problems of 1K-100K queued requests (groups of ~64): "
        "median / p95 solve time and ms per request, ILP vs heuristic"
    )
    default_requests: ClassVar[int] = 100_000
    """The largest queue size; --requests N keeps the sizes <= N (or N alone)."""
    sizes: ClassVar[tuple[int, ...]] = (1_000, 3_000, 10_000, 30_000, 100_000)
    requests_per_group: ClassVar[int] = 64
    queues: ClassVar[int] = 8
    models: ClassVar[int] = 4
    repeats: ClassVar[int] = 10

    def queue_sizes(self, args: ExperimentArgs) -> list[int]:
        top = self.requests(args)
        sizes = [s for s in self.sizes if s <= top] or [top]
        return thin(sizes, args.max_points)

    def execute(self, args: ExperimentArgs, out_dir: Path) -> ExperimentOutput:
        rng = np.random.default_rng(args.seed)
        scheds = {s: GlobalScheduler(GlobalSchedulerConfig(solver=s)) for s in SOLVERS}
        cfg = scheds["ilp"].config
        rows: list[dict[str, Any]] = []
        for size in self.queue_sizes(args):
            groups = max(1, math.ceil(size / self.requests_per_group))
            times: dict[str, list[float]] = {s: [] for s in SOLVERS}
            statuses: dict[str, Counter[str]] = {s: Counter() for s in SOLVERS}
            for _ in range(self.repeats):
                gs, qs = random_problem(rng, groups, self.queues, self.models, size)
                for s, sched in scheds.items():
                    plan = sched.plan(gs, qs)
                    times[s].append(1e3 * plan.solve_s)
                    statuses[s][plan.status] += 1
            for s in SOLVERS:
                t = np.asarray(times[s])
                median = float(np.median(t))
                rows.append(
                    {
                        "solver": s,
                        "queued_requests": size,
                        "groups": groups,
                        "median_ms": median,
                        "p95_ms": float(np.percentile(t, 95)),
                        "max_ms": float(t.max()),
                        "ms_per_request": median / size,
                        "statuses": dict(sorted(statuses[s].items())),
                    }
                )
        headers = [
            "solver",
            "queued requests",
            "groups",
            "median ms",
            "p95 ms",
            "ms / request",
            "statuses",
        ]
        table = [
            [
                r["solver"],
                str(r["queued_requests"]),
                str(r["groups"]),
                fmt_num(r["median_ms"], 1),
                fmt_num(r["p95_ms"], 1),
                f"{r['ms_per_request']:.5f}",
                ", ".join(f"{k} {v}" for k, v in r["statuses"].items()),
            ]
            for r in rows
        ]
        return ExperimentOutput(
            results={
                "queues": self.queues,
                "models": self.models,
                "repeats": self.repeats,
                "requests_per_group": self.requests_per_group,
                "ilp_config": cfg.model_dump(),
                "rows": rows,
            },
            tables=[("Global scheduler solve time", markdown_table(headers, table, left=(0, 6)))],
            figures=[self._figure(rows, out_dir)],
            notes=[
                f"{self.queues} queues, {self.models} models, {self.repeats} problems per size; "
                f"ILP window {cfg.max_ilp_groups} groups, time limit {cfg.time_limit_s:g} s"
            ],
        )

    def _figure(self, rows: list[dict[str, Any]], out_dir: Path) -> Path:
        xs = sorted({float(r["queued_requests"]) for r in rows})

        def series(key: str, scale: float = 1.0) -> dict[str, list[float | None]]:
            by = {(r["solver"], float(r["queued_requests"])): r[key] for r in rows}
            return {s: [scale * by[s, x] if (s, x) in by else None for x in xs] for s in SOLVERS}

        xlabel = "queued requests"
        return save_figure(
            out_dir / f"{self.name}.png",
            [
                Panel(
                    "line",
                    "Median solve time",
                    xlabel,
                    "ms per solve",
                    xs,
                    series("median_ms"),
                    logx=True,
                    logy=True,
                ),
                Panel(
                    "line",
                    "p95 solve time",
                    xlabel,
                    "ms per solve",
                    xs,
                    series("p95_ms"),
                    logx=True,
                    logy=True,
                ),
                Panel(
                    "line",
                    "Amortized",
                    xlabel,
                    "ms per queued request",
                    xs,
                    series("ms_per_request"),
                    logx=True,
                    logy=True,
                ),
            ],
            f"{self.name} ({self.figure}): global scheduler overhead vs queue size",
        )
