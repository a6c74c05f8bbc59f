"""The generated agreement page: stacks of one trace merge across runs, another trace starts
afresh, a simulator-only run keeps the live figure, and the page shows diffs, ranks and load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slomesh.bench.agree.page import render, update_data, update_page

ARGS = {
    "requests": 300,
    "rate": 20.0,
    "seed": 0,
    "classes": "short:0.4:2:16:32-128",
    "replicas": 2,
    "max_num_seqs": 2,
    "max_num_batched_tokens": 2048,
    "profile": "/x/deploy/ray/profiles/cpu-tiny-llama.json",
    "tie_points": 1.0,
}


def report(live: dict[str, float] | None, sim: dict[str, float], **args: Any) -> dict[str, Any]:
    rows = []
    for stack, pct in sim.items():
        row = {"stack": stack, "class_name": "all", "requests": 300, "sim_pct": pct}
        if live is not None:
            row["live_pct"] = live[stack]
        rows.append(row)
        rows.append(row | {"class_name": "short", "sim_pct": 0.0})  # per class, apart
    env = {s: {"loadavg_before": [2.5], "loadavg_after": [3.0], "run_s": 40.0} for s in live or {}}
    return {"args": ARGS | args, "rows": rows, "environment": env}


def test_stacks_of_one_trace_merge_and_another_trace_starts_afresh() -> None:
    data = update_data({}, report({"a": 90.0}, {"a": 92.0}), "cmd-a")
    other_checkout = report({"b": 50.0}, {"b": 60.0}, profile="/y/cpu-tiny-llama.json")
    data = update_data(data, other_checkout, "b")
    assert sorted(data["stacks"]) == ["a", "b"]  # the same profile file from another checkout
    assert data["stacks"]["a"] == {
        "sim_pct": 92.0,
        "live_pct": 90.0,
        "requests": 300,
        "command": "cmd-a",
        "loadavg_before": 2.5,
        "loadavg_after": 3.0,
        "run_s": 40.0,
        "profile": "-",
        "classes": {"short": {"sim_pct": 0.0, "live_pct": 90.0, "requests": 300}},
    }
    fresh = update_data(data, report({"c": 1.0}, {"c": 2.0}, rate=30.0), "cmd-c")
    assert sorted(fresh["stacks"]) == ["c"]


def test_each_stack_keeps_the_profile_calibrated_on_its_own_mesh() -> None:
    both = report({"a": 90.0, "b": 50.0}, {"a": 92.0, "b": 60.0}) | {
        "profile": "calibrated on b",
        "profiles": {"a": "calibrated on a", "b": "calibrated on b"},
    }
    data = update_data({}, both, "cmd")
    assert data["stacks"]["a"]["profile"] == "calibrated on a"
    assert data["stacks"]["b"]["profile"] == "calibrated on b"
    page = render(data)
    assert "- a: `calibrated on a`" in page and "- b: `calibrated on b`" in page


def test_a_simulator_only_run_keeps_the_live_figure() -> None:
    data = update_data({}, report({"a": 90.0}, {"a": 92.0}), "live")
    data = update_data(data, report(None, {"a": 93.0, "b": 40.0}), "sim")
    assert data["stacks"]["a"]["live_pct"] == 90.0 and data["stacks"]["a"]["command"] == "live"
    assert data["stacks"]["b"]["live_pct"] is None


def test_page_rows_ranks_agreement_and_missing_stacks() -> None:
    data = update_data({}, report({"a": 80.0, "b": 50.0}, {"a": 88.0, "b": 49.0}), "cmd")
    data = update_data(data, report(None, {"c": 70.0}), "cmd-sim")
    page = render(data)
    lines = page.splitlines()
    cut = lines.index("Per SLO class:")
    cells = [[c.strip() for c in ln.split("|")[1:-1]] for ln in lines if ln.startswith("|")]
    row = {c[0]: c[1:] for c in cells[: sum(ln.startswith("|") for ln in lines[:cut])]}
    assert row["a"][:7] == ["80.0", "88.0", "-", "-8.0", "no", "1", "1"]
    assert row["b"][:7] == ["50.0", "49.0", "-", "+1.0", "yes", "2", "3"]
    assert row["c"][:7] == ["-", "70.0", "-", "-", "no", "-", "2"]
    assert row["a"][7] == "2.5 / 3.0"
    assert "Rankings agree (ties within 1 points, stacks run live): yes" in page
    assert "Not run live yet: c." in page
    assert "    cmd" in lines and "    cmd-sim" in lines
    per_class = {(c[0], c[1]): c[2:] for c in cells if c[1] == "short"}
    assert per_class[("a", "short")] == ["80.0", "0.0", "+80.0"]
    assert per_class[("c", "short")] == ["-", "0.0", "-"]


def test_rankings_that_differ_are_reported(tmp_path: Path) -> None:
    page = tmp_path / "agreement.md"
    update_page(page, report({"a": 40.0, "b": 60.0}, {"a": 70.0, "b": 50.0}), "cmd")
    assert "Rankings agree (ties within 1 points, stacks run live): no" in page.read_text()
    assert (tmp_path / "agreement.json").exists()


def test_a_scenario_page_gives_each_stacks_swaps(tmp_path: Path) -> None:
    def swaps(live: int, median: float | None, lost: int, errors: int = 0) -> dict[str, Any]:
        return {
            "live_swaps": live,
            "live_swap_median_s": median,
            "profile_swap_median_s": 20.0,
            "profile_over_live": None if median is None else 20.0 / median,
            "failed_requests": 0,
            "lost_requests": lost,
            "error_requests": errors,
            "sim_swaps": 3,
            "by_replica": {"replica-0": {"swaps": []}},
        }

    live = report({"a": 90.0}, {"a": 92.0}, classes="scenario many-models")
    sim_only = report(None, {"b": 40.0}, classes="scenario many-models")
    page = tmp_path / "many-models-live.md"
    update_page(page, live | {"swaps": {"a": swaps(4, 16.0, 1, errors=2)}}, "cmd")
    update_page(page, sim_only | {"swaps": {"b": swaps(0, None, 0)}}, "cmd-sim")
    text = page.read_text()
    assert text.startswith("# many-models: live mesh against the simulator")
    cells = [[c.strip() for c in ln.split("|")[1:-1]] for ln in text.splitlines()]
    row = {c[0]: c[1:] for c in cells if c and c[-1] == "3"}
    assert row["a"] == ["4", "16.0", "20.0", "1.25", "0", "2", "1", "3"]
    assert row["b"] == ["-", "-", "20.0", "-", "-", "-", "-", "3"]  # not run live
    assert "by_replica" not in (tmp_path / "many-models-live.json").read_text()


def test_the_simulated_spread_over_seeds_is_shown_beside_the_median_run() -> None:
    """A run over several timing seeds stores each seed's attainment; the page shows their
    range (a run on one seed shows none) and keeps the range with the stack's entry."""
    seeded = report({"a": 80.0, "b": 50.0}, {"a": 88.0, "b": 49.0}) | {
        "sim_seeds_pct": {"a": [91.0, 85.5, 88.0], "b": [49.0]}
    }
    data = update_data({}, seeded, "cmd")
    assert data["stacks"]["a"]["sim_seeds_pct"] == [91.0, 85.5, 88.0]
    cells = {
        c[0]: c[1:]
        for ln in render(data).splitlines()
        if ln.startswith("| a ") or ln.startswith("| b ")
        for c in [[x.strip() for x in ln.split("|")[1:-1]]]
        if len(c) > 5
    }
    assert cells["a"][:4] == ["80.0", "88.0", "85.5-91.0 (3)", "-8.0"]
    assert cells["b"][2] == "-"
