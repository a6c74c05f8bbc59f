"""`qlm-wb-rates`: QLM paper Figs. 12-13 - multi-model batch serving (WB), Batch-1 rate swept.

Paper: Mistral-7B, Vicuna-13B and Llama-70B on 50 A100s, Batch-1 arrival rate varied with
Batch-2 fixed; Fig. 12 is request throughput (QLM 3-4x the baselines, from fewer model swaps),
Fig. 13 SLO attainment. Here: the `qlm-wb` scenario (2 instances of 4x A100-80GB, all three
models per instance, swapping), batch-1 swept over 0.5-4 req/s with batch-2 fixed at 0.5 req/s.
The throughput ratios qlm / vllm-fcfs and qlm / edf per rate are the paper's headline numbers.
"""

from __future__ import annotations

from typing import Any, ClassVar

from shared.report.table import markdown_table
from slomesh.bench.experiments.helpers import Point
from slomesh.bench.experiments.qlm_wa_rates import COMPARED_STACKS, QLMWARates


def throughput_ratios(points: list[Point], num: str, dens: tuple[str, ...]) -> list[dict[str, Any]]:
    """Per rate: throughput of `num` over each of `dens` (None where a run is missing or 0)."""
    by = {(p.x, p.stack): p.summary.throughput_rps for p in points}
    rows: list[dict[str, Any]] = []
    for x in sorted({p.x for p in points}):
        row: dict[str, Any] = {"x": x}
        for den in dens:
            a, b = by.get((x, num)), by.get((x, den))
            row[f"{num}/{den}"] = a / b if a is not None and b else None
        rows.append(row)
    return rows


class QLMWBRates(QLMWARates):
    """Figs. 12-13: throughput and attainment vs Batch-1 arrival rate on qlm-wb."""

    name: ClassVar[str] = "qlm-wb-rates"
    figure: ClassVar[str] = "Figs. 12-13"
    description: ClassVar[str] = (
        "qlm-wb: batch-1 rate swept (batch-2 fixed); request throughput, SLO attainment and the "
        "throughput ratio of qlm over the baselines"
    )
    default_requests: ClassVar[int] = 1000
    scenario: ClassVar[str] = "qlm-wb"
    stream: ClassVar[str] = "batch-1"
    rates: ClassVar[tuple[float, ...]] = (0.5, 1.0, 2.0, 3.0, 4.0)
    stacks: ClassVar[tuple[str, ...]] = COMPARED_STACKS
    panel_figures: ClassVar[tuple[str, str]] = ("Fig. 12", "Fig. 13")
    ratio_over: ClassVar[tuple[str, ...]] = ("vllm-fcfs", "edf")

    def extra(self, points: list[Point]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        ratios = throughput_ratios(points, "qlm", self.ratio_over)
        keys = [f"qlm/{d}" for d in self.ratio_over]
        rows = [
            [f"{r['x']:g}", *("-" if r[k] is None else f"{r[k]:.2f}x" for k in keys)]
            for r in ratios
        ]
        table = markdown_table([f"{self.stream} r/s", *keys], rows)
        return {"throughput_ratios": ratios}, [("Throughput ratio qlm / baseline", table)]
