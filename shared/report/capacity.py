"""Capacity at SLO: the markdown table (with ratios against baselines), capacity.png, and the
summary.json / summary.md of `slomesh bench --capacity`."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.report.table import fmt_num, markdown_table

BASELINES: tuple[str, ...] = ("llm-d", "ray-serve-llm", "ray-serve-llm-prefix", "vllm-fcfs", "edf")
"""Stacks the table gives ratios against, when present: the peers first, then the baselines."""
RESERVED_KEYS = frozenset({"scenario", "seeds", "requests", "results"})


@dataclass(frozen=True, slots=True)
class CapacityRow:
    """One stack: median capacity (r/s), capacity per seed, and its JSON result row."""

    stack: str
    capacity_rps: float
    by_seed: Mapping[int, float]
    json: Mapping[str, Any] = field(default_factory=dict)
    unbounded_seeds: frozenset[int] = frozenset()
    """Seeds whose search attained the target at every rate probed: a lower bound (">=")."""
    every_class_rps: float | None = None
    """Median capacity with every SLO class at the target (None: not searched)."""
    every_class_unbounded: bool = False
    """Some seed's every-class search attained at every rate probed (a lower bound)."""

    def headline_rps(self) -> float:
        """The figure ratios compare: every-class when searched, else overall."""
        return self.every_class_rps if self.every_class_rps is not None else self.capacity_rps


def ratio(a: float, b: float) -> float | None:
    """a / b, or None when b is 0 (no capacity to compare with)."""
    return a / b if b > 0 else None


def format_capacity_table(rows: Sequence[CapacityRow], target: float) -> str:
    """Rows: stacks; columns: capacity per seed, median, and x baseline for each baseline
    among the stacks."""
    seeds = list(dict.fromkeys(s for r in rows for s in r.by_seed))
    by_stack = {r.stack: r for r in rows}
    bases = [b for b in BASELINES if b in by_stack]
    every = any(r.every_class_rps is not None for r in rows)
    headers = [
        "stack",
        *(f"seed {s} r/s" for s in seeds),
        f"capacity r/s (median, >= {100 * target:g}% SLO)",
        *([f"every class r/s (median, each >= {100 * target:g}%)"] if every else []),
        *(f"x {b}" for b in bases),
    ]
    body = []
    for r in rows:
        ratios = [ratio(r.headline_rps(), by_stack[b].headline_rps()) for b in bases]
        open_median = ">=" if r.unbounded_seeds else ""
        every_cell = _bound(r.every_class_unbounded) + fmt_num(r.every_class_rps, 2)
        body.append(
            [
                r.stack,
                *(_bound(s in r.unbounded_seeds) + fmt_num(r.by_seed.get(s), 2) for s in seeds),
                open_median + fmt_num(r.capacity_rps, 2),
                *([every_cell] if every else []),
                *(fmt_num(x, 2) for x in ratios),
            ]
        )
    table = markdown_table(headers, body)
    if every and bases:
        table += "\n\nx B: every-class capacity over B's every-class capacity"
    if any(r.unbounded_seeds or r.every_class_unbounded for r in rows):
        table += "\n\n>= : attained at every rate probed (a lower bound; the SLO never binds)"
    return table


def _bound(unbounded: bool) -> str:
    return ">=" if unbounded else ""


def plot_capacity(out_dir: Path, rows: Sequence[CapacityRow], target: float) -> Path:
    """capacity.png: a bar per stack at its median capacity, a dot per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6.0, 1.4 * len(rows) + 2.0), 4.2))
    try:
        xs = list(range(len(rows)))
        ax.bar(xs, [r.capacity_rps for r in rows], width=0.6, label="median")
        for x, r in zip(xs, rows, strict=True):
            vals = list(r.by_seed.values())
            ax.scatter([x] * len(vals), vals, color="black", s=12, zorder=3)
        ax.set_xticks(xs)
        ax.set_xticklabels([r.stack for r in rows], rotation=20 if len(rows) > 4 else 0)
        ax.set_ylabel("arrival rate r/s")
        ax.set_title(f"capacity at >= {100 * target:g}% SLO attainment (dots: seeds)")
        ax.grid(alpha=0.3, axis="y")
        path = out_dir / "capacity.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
    finally:
        plt.close(fig)
    return path


def write_capacity(
    out_dir: Path,
    scenario: str,
    seeds: Sequence[int],
    requests: int,
    rows: Sequence[CapacityRow],
    target: float,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write summary.json, summary.md and capacity.png; return the JSON dict.

    The JSON is {"scenario", "seeds", "requests" (per probe), "results": [row.json, ...]}
    followed by the keys of `extra` (which must not reuse those names).
    """
    extra = extra or {}
    clash = RESERVED_KEYS & extra.keys()
    if clash:
        raise ValueError(f"extra keys clash with capacity keys: {sorted(clash)}")
    data: dict[str, Any] = {
        "scenario": scenario,
        "seeds": list(seeds),
        "requests": requests,
        "results": [dict(r.json) for r in rows],
        **extra,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=2, allow_nan=False) + "\n"
    (out_dir / "summary.json").write_text(text, encoding="utf-8")
    head = (
        f"# slomesh capacity: {scenario}\n\nseeds {', '.join(map(str, seeds))}, "
        f"{requests} requests per probe, target {100 * target:g}% SLO attainment"
    )
    table = format_capacity_table(rows, target)
    (out_dir / "summary.md").write_text(f"{head}\n\n{table}\n", encoding="utf-8")
    plot_capacity(out_dir, rows, target)
    return data
