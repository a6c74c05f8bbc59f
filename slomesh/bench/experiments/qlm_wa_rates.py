"""`qlm-wa-rates`: QLM paper Figs. 9-10 - single-model serving (WA) with the interactive rate swept.

Paper: Vicuna-13B on 50 A100s, interactive arrival rate varied with the batch streams fixed;
Fig. 9 is request throughput at 0.5K req/s, Fig. 10 SLO attainment vs the interactive rate for
vLLM, EDF, SHEPHERD and QLM. Here: the `qlm-wa` scenario (2x A100-80GB), the interactive stream
swept from 1 to 3.5 req/s (the scenario's default is 2.25) with batch-1 (1.35) and batch-2
(0.9 req/s) fixed; SHEPHERD is replaced by `oracle` (true lengths, EDF with eviction) as the
reference. Every rate uses the same seed, so runs differ only in the interactive arrivals.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

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
    save_figure,
    series_by_policy,
    sweep_stream,
    throughput_cell,
    with_requests,
)
from slomesh.bench.scenarios import SCENARIOS

COMPARED_STACKS = ("vllm-fcfs", "edf", "oracle", "qlm")
PCT = (0.0, 105.0)


class QLMWARates(Experiment):
    """Figs. 9-10: attainment and throughput vs interactive arrival rate on qlm-wa."""

    name: ClassVar[str] = "qlm-wa-rates"
    figure: ClassVar[str] = "Figs. 9-10"
    description: ClassVar[str] = (
        "qlm-wa: interactive rate swept (batch streams fixed); SLO attainment and request "
        "throughput per stack"
    )
    default_requests: ClassVar[int] = 2000
    scenario: ClassVar[str] = "qlm-wa"
    stream: ClassVar[str] = "interactive"
    rates: ClassVar[tuple[float, ...]] = (1.0, 1.5, 2.0, 2.5, 3.0, 3.5)
    stacks: ClassVar[tuple[str, ...]] = COMPARED_STACKS
    panel_figures: ClassVar[tuple[str, str]] = ("Fig. 9", "Fig. 10")
    """Paper figure of the throughput panel and of the attainment panel."""

    def extra(self, points: list[Point]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        """Extra results keys and tables (none here)."""
        return {}, []

    def execute(self, args: ExperimentArgs, out_dir: Path) -> ExperimentOutput:
        sc = with_requests(SCENARIOS.create(self.scenario), self.requests(args))
        rates = thin(self.rates, args.max_points)
        total = sc.workload.requests * len(rates) * len(self.stacks)
        with progress(args.progress, total, self.name) as tick:
            points = sweep_stream(sc, self.stream, rates, self.stacks, args.seed, tick)
        x_label = f"{self.stream} r/s"
        fixed = {s.name: s.rate_rps for s in sc.workload.streams if s.name != self.stream}
        fig = self._figure(points, out_dir)
        extra_results, extra_tables = self.extra(points)
        return ExperimentOutput(
            results={
                "scenario": self.scenario,
                "swept_stream": self.stream,
                "fixed_rates_rps": fixed,
                "rates_rps": rates,
                "stacks": list(self.stacks),
                "points": [point_json(p) for p in points],
                **extra_results,
            },
            tables=[
                ("SLO attainment % by rate", pivot(points, x_label, attainment_cell)),
                ("Throughput r/s by rate", pivot(points, x_label, throughput_cell)),
                *extra_tables,
                ("Detail", detail_table(points, x_label)),
            ],
            figures=[fig],
            notes=[
                f"scenario {self.scenario}, {self.stream} stream swept over "
                f"{', '.join(f'{r:g}' for r in rates)} req/s; fixed: "
                + ", ".join(f"{k} {v:g} req/s" for k, v in fixed.items())
            ],
        )

    def _figure(self, points: list[Point], out_dir: Path) -> Path:
        xs, att = series_by_policy(points, pct)
        _, thr = series_by_policy(points, rps)
        xlabel = f"{self.stream} arrival rate (r/s)"
        thr_fig, att_fig = self.panel_figures
        return save_figure(
            out_dir / f"{self.name}.png",
            [
                Panel("line", f"Request throughput ({thr_fig})", xlabel, "requests / s", xs, thr),
                Panel("line", f"SLO attainment ({att_fig})", xlabel, "SLO met %", xs, att, PCT),
            ],
            f"{self.name}: {self.scenario}, {self.stream} rate swept",
        )
