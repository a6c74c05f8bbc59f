"""A scenario's page keeps a ladder of rates: a run at another rate of the same trace adds a
rung beside the stored ones (a data file of one trace, written before the ladder, is its first
rung), a run at a stored rate merges into that rung, another trace otherwise starts afresh, and
the page shows every rate's attainment side by side, then one section per rate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slomesh.bench.agree.page import render, update_data, update_page
from slomesh.bench.agree.page_data import merge_trace

ARGS = {
    "requests": 120,
    "rate": 1.0,
    "seed": 0,
    "classes": "scenario many-models",
    "replicas": 2,
    "max_num_seqs": 16,
    "max_num_batched_tokens": 2048,
    "profile": "/x/deploy/ray/profiles/cpu-tiny-many.json",
    "tie_points": 1.0,
}


def report(live: dict[str, float] | None, sim: dict[str, float], **args: Any) -> dict[str, Any]:
    rows = []
    for stack, pct in sim.items():
        row: dict[str, Any] = {"stack": stack, "class_name": "all", "requests": 120}
        row["sim_pct"] = pct
        row["live_pct"] = (live or {}).get(stack)
        rows.append(row)
    return {"args": ARGS | args, "rows": rows, "environment": {}}


def rates(data: dict[str, Any]) -> list[float]:
    return [r["trace"]["rate"] for r in data["ladder"]]


@pytest.mark.parametrize(
    ("second", "kept_rates", "stacks_at_1"),
    [
        ({"rate": 1.5}, [1.0, 1.5], ["a"]),  # another rate: a rung beside
        ({"rate": 0.5}, [0.5, 1.0], ["a"]),  # rungs stay sorted by rate
        ({}, [1.0], ["a", "b"]),  # the same rate: merged into its rung
        ({"rate": 1.5, "seed": 1}, [1.5], None),  # another trace otherwise: afresh
        ({"requests": 60}, [1.0], ["b"]),
    ],
)
def test_a_run_adds_a_rung_merges_into_one_or_starts_afresh(
    second: dict[str, Any], kept_rates: list[float], stacks_at_1: list[str] | None
) -> None:
    data = update_data({}, report({"a": 90.0}, {"a": 92.0}), "first")
    data = update_data(data, report({"b": 50.0}, {"b": 60.0}, **second), "second")
    assert rates(data) == kept_rates
    at_1 = [r for r in data["ladder"] if r["trace"]["rate"] == 1.0]
    assert (sorted(at_1[0]["stacks"]) if at_1 else None) == stacks_at_1


def test_a_single_trace_file_written_before_the_ladder_is_its_first_rung() -> None:
    old = merge_trace({}, report({"a": 90.0}, {"a": 92.0}), "old")
    assert "ladder" not in old
    assert render(old).count("## 1 requests/s") == 1  # rendered as a ladder of one
    data = update_data(old, report({"a": 40.0}, {"a": 45.0}, rate=2.0), "new")
    assert rates(data) == [1.0, 2.0]
    assert data["ladder"][0]["stacks"]["a"]["live_pct"] == 90.0


def test_the_page_shows_every_rate_side_by_side_then_a_section_per_rate(tmp_path: Path) -> None:
    page = tmp_path / "many-models-live.md"
    update_page(page, report({"a": 90.0, "b": 70.0}, {"a": 92.0, "b": 72.0}), "at-1")
    update_page(page, report({"a": 80.0}, {"a": 81.0, "b": 40.0}, rate=2.0), "at-2")
    text = page.read_text()
    assert text.startswith("# many-models: live mesh against the simulator")
    cells = [[c.strip() for c in ln.split("|")[1:-1]] for ln in text.splitlines()]
    ladder = {c[0]: c[1:] for c in cells if len(c) == 3}
    assert ladder["stack"] == ["1/s live / sim %", "2/s live / sim %"]
    assert ladder["a"] == ["90.0 / 92.0", "80.0 / 81.0"]
    assert ladder["b"] == ["70.0 / 72.0", "- / 40.0"]  # not run live at 2/s
    one, two = text.index("## 1 requests/s"), text.index("## 2 requests/s")
    assert one < text.index("    at-1") < two < text.index("    at-2")
