"""The data file behind a generated agreement page (the page's path with .json): each stack's
figures of the runs merged into it.

Live runs are short and one at a time, so the stacks of one trace may come from several
invocations: an entry is kept while the trace it was measured on (requests, rate, seed,
classes, seats, token budget, profile) is the stored one, and a run on another trace starts the
data afresh. A scenario's page (`bench-agree --scenario`) keeps a ladder of rates instead: a run
at another rate of the same trace otherwise (the issue's fixed ladder of rates, since a live
capacity search with model swaps would take hours) adds a rung beside the stored ones, a run at
a stored rate merges into that rung, and a run that differs in anything else starts afresh.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

TRACE_KEYS = (
    "requests",
    "rate",
    "seed",
    "classes",
    "replicas",
    "max_num_seqs",
    "max_num_batched_tokens",
    "profile",
)
"""The bench-agree arguments that fix the trace and the replicas both sides run."""


def trace_key(args: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments (of a report's `args`) that make two runs comparable (the profile by its
    file name, so runs from another checkout compare)."""
    key = {k: args[k] for k in TRACE_KEYS}
    key["profile"] = Path(str(key["profile"])).name
    return key


def is_scenario(trace: Mapping[str, Any]) -> bool:
    """The trace is a `bench-agree --scenario` run's (its classes name the scenario)."""
    return str(trace["classes"]).startswith("scenario ")


def entries(report: Mapping[str, Any], command: str) -> dict[str, dict[str, Any]]:
    """stack -> its figures in a bench-agree report (the `all` rows, and each class's under
    `classes`; live ones when run)."""
    env = report.get("environment", {})
    out: dict[str, dict[str, Any]] = {}
    classes: dict[str, dict[str, Any]] = {}
    for row in report["rows"]:
        if row["class_name"] != "all":
            classes.setdefault(row["stack"], {})[row["class_name"]] = {
                "sim_pct": row["sim_pct"],
                "live_pct": row.get("live_pct"),
                "requests": row["requests"],
            }
            continue
        stack = row["stack"]
        live = row.get("live_pct")
        out[stack] = {
            "sim_pct": row["sim_pct"],
            "live_pct": live,
            "requests": row["requests"],
            "command": command,
            "profile": report.get("profiles", {}).get(stack, report.get("profile", "-")),
            "classes": classes.setdefault(stack, {}),
        }
        seeds = report.get("sim_seeds_pct", {}).get(stack)
        if seeds:
            out[stack]["sim_seeds_pct"] = seeds
        on_credit = report.get("sim_on_credit", {}).get(stack)
        if on_credit is not None:  # the simulated ingress ran the lease fast path
            out[stack]["sim_on_credit"] = on_credit
        ends = report.get("outcomes", {}).get(stack)
        if ends:
            out[stack]["outcomes"] = ends
        swaps = report.get("swaps", {}).get(stack)
        if swaps is not None:  # a --scenario run: its swaps (scenario.swap_report)
            out[stack]["swaps"] = {k: v for k, v in swaps.items() if k != "by_replica"}
        if stack in env:
            e = env[stack]
            out[stack] |= {
                "loadavg_before": e["loadavg_before"][0],
                "loadavg_after": e["loadavg_after"][0],
                "run_s": e["run_s"],
            }
    return out


def merge_trace(data: Mapping[str, Any], report: Mapping[str, Any], command: str) -> dict[str, Any]:
    """One trace's stored data (`{trace, tie_points, stacks}`, or {}) with `report`'s stacks
    merged in: the same trace only, another starts afresh; a simulator-only run keeps the live
    figure measured before."""
    key = trace_key(report["args"])
    stacks = dict(data.get("stacks", {})) if data.get("trace") == key else {}
    for stack, entry in entries(report, command).items():
        if entry["live_pct"] is None and stacks.get(stack, {}).get("live_pct") is not None:
            continue  # a simulator-only run keeps the live figure measured before
        stacks[stack] = entry
    return {"trace": key, "tie_points": report["args"]["tie_points"], "stacks": stacks}


def rungs(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A scenario page's stored traces, one per rate, lowest rate first (a data file written
    before the ladder holds one trace: it is the only rung)."""
    if "ladder" in data:
        return [dict(r) for r in data["ladder"]]
    return [dict(data)] if data.get("trace") else []


def _sans_rate(trace: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in trace.items() if k != "rate"}


def merge_ladder(
    data: Mapping[str, Any], report: Mapping[str, Any], command: str
) -> dict[str, Any]:
    """A scenario page's stored ladder with `report` merged into the rung of its rate (module
    docstring: another rate adds a rung, another trace otherwise starts afresh)."""
    key = trace_key(report["args"])
    kept = [r for r in rungs(data) if _sans_rate(r["trace"]) == _sans_rate(key)]
    here = next((r for r in kept if r["trace"]["rate"] == key["rate"]), {})
    others = [r for r in kept if r["trace"]["rate"] != key["rate"]]
    ladder = [*others, merge_trace(here, report, command)]
    return {"ladder": sorted(ladder, key=lambda r: float(r["trace"]["rate"]))}


def update_data(data: Mapping[str, Any], report: Mapping[str, Any], command: str) -> dict[str, Any]:
    """The stored data with `report`'s stacks merged in (module docstring)."""
    if is_scenario(trace_key(report["args"])):
        return merge_ladder(data, report, command)
    return merge_trace(data, report, command)
