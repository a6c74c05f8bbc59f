"""Bench output writers: summary.json / summary.md for one comparison, sweep.* for rate sweeps."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from shared.metrics.summary import StackSummary, round_sig
from shared.report.plots import plot_sweep
from shared.report.table import fmt_num, fmt_pct, format_class_tables, format_table, markdown_table

RESERVED_KEYS = frozenset({"scenario", "seed", "requests", "results"})
SWEEP_RESERVED_KEYS = frozenset({"scenario", "seed", "requests", "sweep"})


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n", encoding="utf-8")


def _header(title: str, scenario: str, seed: int, requests: int) -> str:
    return f"# {title}: {scenario}\n\nseed {seed}, {requests} requests"


def write_summary(
    out_dir: Path,
    scenario: str,
    seed: int,
    requests: int,
    summaries: list[StackSummary],
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write out_dir/summary.json and out_dir/summary.md; return the JSON dict.

    The JSON is {"scenario", "seed", "requests", "results": [summary.to_dict(), ...]} followed by
    the keys of `extra` (which must not reuse those four names).
    """
    extra = extra or {}
    clash = RESERVED_KEYS & extra.keys()
    if clash:
        raise ValueError(f"extra keys clash with summary keys: {sorted(clash)}")
    data: dict[str, Any] = {
        "scenario": scenario,
        "seed": seed,
        "requests": requests,
        "results": [s.to_dict() for s in summaries],
        **extra,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_json(out_dir / "summary.json", data)

    parts = [_header("slomesh bench", scenario, seed, requests), format_table(summaries)]
    per_class = format_class_tables(summaries)
    if per_class:
        parts += ["## Per-class results", per_class]
    (out_dir / "summary.md").write_text("\n\n".join(parts) + "\n", encoding="utf-8")
    return data


def _rates(sweep: Mapping[str, Sequence[tuple[float, StackSummary]]]) -> list[float]:
    return sorted({rate for points in sweep.values() for rate, _ in points})


def _pivot(
    sweep: Mapping[str, Sequence[tuple[float, StackSummary]]],
    cell: str,
) -> str:
    """Rows: arrival rates; columns: stacks; cells: attainment % or goodput r/s."""
    stacks = list(sweep)
    rows: list[list[str]] = []
    for rate in _rates(sweep):
        row = [f"{rate:g}"]
        for stack in stacks:
            match = [s for r, s in sweep[stack] if r == rate]
            if not match:
                row.append("-")
            elif cell == "attainment":
                row.append(fmt_pct(match[0].slo_attainment))
            else:
                row.append(fmt_num(match[0].goodput_rps, 2))
        rows.append(row)
    return markdown_table(["rate r/s", *stacks], rows)


def format_sweep_tables(sweep: Mapping[str, Sequence[tuple[float, StackSummary]]]) -> str:
    """Markdown: attainment and goodput pivots, then one detail row per (stack, rate)."""
    detail: list[list[str]] = []
    for stack, points in sweep.items():
        for rate, s in sorted(points, key=lambda p: p[0]):
            detail.append(
                [
                    stack,
                    f"{rate:g}",
                    fmt_pct(s.slo_attainment),
                    fmt_num(s.goodput_rps, 2),
                    fmt_num(s.throughput_rps, 2),
                    fmt_num(s.ttft_p99_s),
                    fmt_num(s.tpot_p99_s, 1, 1000.0),
                    str(s.rejected),
                    str(s.unfinished),
                ]
            )
    headers = [
        "stack",
        "rate r/s",
        "SLO attainment %",
        "goodput r/s",
        "throughput r/s",
        "TTFT p99 s",
        "TPOT p99 ms",
        "rejected",
        "unfinished",
    ]
    return "\n\n".join(
        [
            "## SLO attainment % by arrival rate",
            _pivot(sweep, "attainment"),
            "## Goodput r/s by arrival rate",
            _pivot(sweep, "goodput"),
            "## Detail",
            markdown_table(headers, detail),
        ]
    )


def write_sweep(
    out_dir: Path,
    scenario: str,
    seed: int,
    requests: int,
    sweep: dict[str, list[tuple[float, StackSummary]]],
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write sweep.json, sweep.md, attainment_vs_rate.png and goodput_vs_rate.png; return the dict.

    `sweep` maps stack -> [(arrival rate r/s, summary)]. The JSON is {"scenario", "seed",
    "requests", "sweep": {stack: [{"rate_rps": rate, **summary.to_dict()}, ...]}} (points in
    increasing rate order) followed by the keys of `extra`.
    """
    extra = extra or {}
    clash = SWEEP_RESERVED_KEYS & extra.keys()
    if clash:
        raise ValueError(f"extra keys clash with sweep keys: {sorted(clash)}")
    data: dict[str, Any] = {
        "scenario": scenario,
        "seed": seed,
        "requests": requests,
        "sweep": {
            stack: [
                {"rate_rps": round_sig(rate), **s.to_dict()}
                for rate, s in sorted(points, key=lambda p: p[0])
            ]
            for stack, points in sweep.items()
        },
        **extra,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_json(out_dir / "sweep.json", data)
    md = _header("slomesh sweep", scenario, seed, requests) + "\n\n" + format_sweep_tables(sweep)
    (out_dir / "sweep.md").write_text(md + "\n", encoding="utf-8")
    plot_sweep(out_dir, sweep)
    return data
