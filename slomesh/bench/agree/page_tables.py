"""The tables of one trace on a generated agreement page: each stack's live and simulated
attainment with the difference, both ranks and the host's load, the same per SLO class, how
each class's requests ended, and both rankings.

Targets (checked, not asserted): each stack's live attainment within `MAX_DIFF_POINTS` of the
simulated one, and the same ranking on both sides (pairs within `tie_points` count as tied).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.report.table import markdown_table
from slomesh.bench.agree.compare import ranking, rankings_agree
from slomesh.bench.agree.outcomes import KINDS

MAX_DIFF_POINTS = 5.0
"""Largest |live - sim| attainment difference per stack that counts as agreement, points."""


def fmt(x: float | None, sign: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x:+.1f}" if sign else f"{x:.1f}"


def band(e: Mapping[str, Any]) -> str:
    """The simulated attainment's range over the timing seeds ("-": one seed)."""
    seeds = e.get("sim_seeds_pct") or []
    if len(seeds) < 2:
        return "-"
    return f"{min(seeds):.1f}-{max(seeds):.1f} ({len(seeds)})"


def outcomes(stacks: Mapping[str, Mapping[str, Any]], order: list[str]) -> str:
    """The table of how each (stack, class) ended on both sides ("": none stored)."""
    rows = []
    for s in order:
        ends = stacks[s].get("outcomes")
        if not ends:
            continue
        live, sim = ends["live"], ends["sim"]
        for c in sorted(set(live) | set(sim)):
            a, b = live.get(c, {}), sim.get(c, {})
            if set(a) <= {"met"} and set(b) <= {"met"}:
                continue
            rows.append([s, c, *(f"{a.get(k, 0)} / {b.get(k, 0)}" for k in KINDS)])
    return markdown_table(["stack", "class", *KINDS], rows, left=(0, 1)) if rows else ""


def diff(x: Mapping[str, Any]) -> float | None:
    """live - sim attainment, points (None: not run live)."""
    return None if x.get("live_pct") is None else x["live_pct"] - x["sim_pct"]


@dataclass(frozen=True)
class TraceTables:
    """One trace's tables and rankings, as a page prints them."""

    table: str
    per_class: str
    live: dict[str, float]
    sim: dict[str, float]
    agree: bool | None
    """The rankings agree over the stacks run live (None: fewer than two)."""

    def lines(self, ties: str = "") -> list[str]:
        """The table, both rankings, whether they agree, and the per-class table (page lines)."""
        verdict = "-" if self.agree is None else ("yes" if self.agree else "no")
        return [
            self.table,
            "",
            f"Live ranking: {' > '.join(ranking(self.live)) or '-'}",
            "",
            f"Sim ranking: {' > '.join(ranking(self.sim))}",
            "",
            f"Rankings agree ({ties}stacks run live): {verdict}",
            "",
            "Per SLO class:",
            "",
            self.per_class,
        ]


def trace_tables(data: Mapping[str, Any]) -> TraceTables:
    """The tables of one stored trace (`{trace, tie_points, stacks}`)."""
    stacks: Mapping[str, Mapping[str, Any]] = data["stacks"]
    tie = float(data["tie_points"])
    sim = {s: e["sim_pct"] for s, e in stacks.items()}
    live = {s: e["live_pct"] for s, e in stacks.items() if e["live_pct"] is not None}
    sim_rank = {s: i + 1 for i, s in enumerate(ranking(sim))}
    live_rank = {s: i + 1 for i, s in enumerate(ranking(live))}
    rows = []
    for s in ranking(sim):
        e = stacks[s]
        d = diff(e)
        load = "-"
        if "loadavg_before" in e:
            load = f"{e['loadavg_before']:.1f} / {e['loadavg_after']:.1f}"
        rows.append(
            [
                s,
                fmt(e["live_pct"]),
                fmt(e["sim_pct"]),
                band(e),
                fmt(d, sign=True),
                "yes" if d is not None and abs(d) <= MAX_DIFF_POINTS else "no",
                str(live_rank.get(s, "-")),
                str(sim_rank[s]),
                load,
            ]
        )
    table = markdown_table(
        [
            "stack",
            "live att. %",
            "sim att. %",
            "sim over seeds",
            "live - sim (points)",
            f"within {MAX_DIFF_POINTS:g}",
            "live rank",
            "sim rank",
            "load avg before / after",
        ],
        rows,
        left=(0, 5),
    )
    class_rows = [
        [s, c, fmt(x["live_pct"]), fmt(x["sim_pct"]), fmt(diff(x), sign=True)]
        for s in ranking(sim)
        for c, x in sorted(stacks[s].get("classes", {}).items())
    ]
    per_class = markdown_table(
        ["stack", "class", "live att. %", "sim att. %", "live - sim (points)"],
        class_rows,
        left=(0, 1),
    )
    ends = outcomes(stacks, ranking(sim))
    if ends:
        per_class += (
            "\n\nHow each class's requests ended, live / sim (met, served late, or turned away "
            "by the rule named: slomesh/bench/agree/outcomes.py); classes that met every SLO on "
            "both sides are left out:\n\n" + ends
        )
    agree = rankings_agree(live, {s: sim[s] for s in live}, tie) if len(live) > 1 else None
    return TraceTables(table, per_class, live, sim, agree)
