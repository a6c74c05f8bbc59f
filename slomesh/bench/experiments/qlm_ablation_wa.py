"""`qlm-ablation-wa`: QLM paper Fig. 11 - contribution of each LSO on the single-model workload.

Paper: WA (Vicuna-13B) at 0.5K interactive req/s; QLM with one LLM serving operation removed at a
time (request pulling, eviction, model swapping, load balancing). Pulling matters most for the
interactive SLOs, eviction for throughput, swapping not at all (one model). Here: the `qlm-wa`
scenario at its default rate (interactive 2.25, batch-1 1.35, batch-2 0.9 req/s on 2x
A100-80GB), `qlm` and the stacks qlm-no-pull, qlm-no-evict, qlm-no-swap, qlm-no-balance.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from shared.metrics.summary import StackSummary
from shared.report.table import markdown_table
from shared.workloads import generate
from slomesh.bench.experiments.base import Experiment, ExperimentArgs, ExperimentOutput
from slomesh.bench.experiments.helpers import (
    DETAIL_HEADERS,
    Panel,
    detail_cells,
    progress,
    run_stacks,
    save_figure,
    with_requests,
    with_stream_rate,
)
from slomesh.bench.scenarios import SCENARIOS, ScenarioSpec

VARIANTS = ("qlm", "qlm-no-pull", "qlm-no-evict", "qlm-no-swap", "qlm-no-balance")


class QLMAblationWA(Experiment):
    """Fig. 11: qlm with each LSO removed, bars of attainment and throughput."""

    name: ClassVar[str] = "qlm-ablation-wa"
    figure: ClassVar[str] = "Fig. 11"
    description: ClassVar[str] = (
        "qlm-wa at its default rate: qlm and each LSO removed (pull, evict, swap, balance); "
        "SLO attainment (overall, per class) and throughput"
    )
    default_requests: ClassVar[int] = 3500
    scenario: ClassVar[str] = "qlm-wa"
    stream_rate: ClassVar[tuple[str, float] | None] = None
    """(stream, req/s) to override in the scenario; None: the scenario's default rates."""

    def scenario_spec(self, args: ExperimentArgs) -> ScenarioSpec:
        sc = with_requests(SCENARIOS.create(self.scenario), self.requests(args))
        if self.stream_rate is not None:
            stream, rate = self.stream_rate
            sc = sc.model_copy(update={"workload": with_stream_rate(sc.workload, stream, rate)})
        return sc

    def execute(self, args: ExperimentArgs, out_dir: Path) -> ExperimentOutput:
        sc = self.scenario_spec(args)
        requests = generate(sc.workload, args.seed)
        with progress(args.progress, len(requests) * len(VARIANTS), self.name) as tick:
            runs = run_stacks(sc.cluster, VARIANTS, requests, tick)
        summaries = [r.summary for r in runs.values()]
        rates = {s.name: s.rate_rps for s in sc.workload.streams}
        rows = [[s.stack, *detail_cells(s)] for s in summaries]
        table = markdown_table(["variant", *DETAIL_HEADERS], rows, left=(0, 2))
        return ExperimentOutput(
            results={
                "scenario": self.scenario,
                "stream_rates_rps": rates,
                "variants": [s.to_dict() for s in summaries],
            },
            tables=[("LSO ablation", table)],
            figures=[self._figure(summaries, out_dir)],
            notes=[
                f"scenario {self.scenario}: "
                + ", ".join(f"{k} {v:g} req/s" for k, v in rates.items())
                + f", {sc.cluster.num_instances} instances"
            ],
        )

    def _figure(self, summaries: list[StackSummary], out_dir: Path) -> Path:
        labels = [s.stack for s in summaries]
        att: dict[str, list[float | None]] = {
            "overall": [100 * s.slo_attainment for s in summaries]
        }
        for cls in sorted({c for s in summaries for c in s.attainment_by_class}):
            att[cls] = [
                100 * s.attainment_by_class[cls] if cls in s.attainment_by_class else None
                for s in summaries
            ]
        thr: dict[str, list[float | None]] = {
            "throughput": [s.throughput_rps for s in summaries],
            "goodput": [s.goodput_rps for s in summaries],
        }
        return save_figure(
            out_dir / f"{self.name}.png",
            [
                Panel("bar", "SLO attainment", "variant", "SLO met %", labels, att, (0.0, 105.0)),
                Panel("bar", "Request throughput", "variant", "requests / s", labels, thr),
            ],
            f"{self.name} ({self.figure}): {self.scenario}, one LSO removed at a time",
        )
