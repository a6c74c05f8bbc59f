"""Capacity two ways: the every-class early stop, the table's every-class column and ratios, and
the generated results page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared.metrics.summary import summarize
from shared.report.capacity import CapacityRow, format_capacity_table
from shared.workloads import generate
from slomesh.bench.capacity import CapacitySettings
from slomesh.bench.capacity_page import render, update_page
from slomesh.bench.capacity_run import make_probe
from slomesh.bench.scenarios import SCENARIOS
from slomesh.sim.simulator import Simulator
from slomesh.stacks import STACKS


@pytest.mark.slow
@pytest.mark.parametrize("rate", [4.0, 12.0, 40.0])
def test_every_class_early_stop_gives_the_full_runs_verdict(rate: float) -> None:
    sc = SCENARIOS.create("smoke")
    probe = make_probe(sc, "vllm-fcfs", 0, CapacitySettings(probe_requests=150), "every-class")
    workload = sc.workload.model_copy(update={"requests": 150}).with_total_rate(rate)
    full = summarize(Simulator(sc.cluster, STACKS.create("vllm-fcfs"), generate(workload, 0)).run())
    worst = min(full.attainment_by_class.values())
    assert (probe(rate) >= 0.9) == (worst >= 0.9)
    # the every-class figure never exceeds the overall one (a mean over the classes)
    assert worst <= full.slo_attainment


def test_table_every_class_column_and_ratios() -> None:
    rows = [
        CapacityRow("llm-d", 6.0, {0: 6.0}, every_class_rps=4.0),
        CapacityRow("slomesh", 8.0, {0: 8.0}, every_class_rps=6.0),
    ]
    table = format_capacity_table(rows, 0.9)
    header = table.splitlines()[0]
    assert "every class r/s" in header and "x llm-d" in header
    flagship = next(line for line in table.splitlines() if line.startswith("| slomesh"))
    assert flagship.replace(" ", "").endswith("|8.00|6.00|1.50|")  # 6 / 4, not 8 / 6
    assert "every-class capacity over" in table


def test_page_keeps_every_scenario_and_the_command(tmp_path: Path) -> None:
    page = tmp_path / "capacity.md"
    a = [
        CapacityRow("llm-d", 5.0, {0: 5.0}, every_class_rps=4.0),
        CapacityRow("slomesh", 6.0, {0: 6.0}, every_class_rps=5.2),
    ]
    update_page(page, "qlm-wa", "one model", "slomesh bench --scenario qlm-wa", [0], 100, 0.9, a)
    b = [CapacityRow("ray-serve-llm", 3.0, {0: 3.0}, every_class_rps=3.0)]
    update_page(page, "azure-code", "code", "slomesh bench --scenario azure-code", [0], 100, 0.9, b)
    text = page.read_text()
    assert "## qlm-wa" in text and "## azure-code" in text
    assert "    slomesh bench --scenario qlm-wa" in text
    flat = " ".join(text.split())
    assert "5.20 (6.00)" in flat  # every class (overall) in the overview
    assert "| qlm-wa | 5.20 | llm-d | 4.00 | 1.30 |" in flat  # the flagship over the best peer
    data = json.loads(page.with_suffix(".json").read_text())
    assert set(data) == {"qlm-wa", "azure-code"}
    assert render(data) == text  # the page is a function of its data file


def test_a_run_of_some_stacks_keeps_the_scenarios_other_rows(tmp_path: Path) -> None:
    page = tmp_path / "capacity.md"
    peers = [
        CapacityRow("llm-d", 5.0, {0: 5.0}, every_class_rps=4.0),
        CapacityRow("edf", 4.0, {0: 4.0}, every_class_rps=3.0),
    ]
    update_page(page, "qlm-wa", "one model", "bench --stacks llm-d,edf", [0], 100, 0.9, peers)
    flagship = [
        CapacityRow("slomesh", 6.0, {0: 6.0}, every_class_rps=5.2),
        CapacityRow("edf", 4.4, {0: 4.4}, every_class_rps=3.3),
    ]
    update_page(page, "qlm-wa", "one model", "bench --stacks slomesh,edf", [0], 100, 0.9, flagship)
    rows = json.loads(page.with_suffix(".json").read_text())["qlm-wa"]["rows"]
    assert [(r["stack"], r["every_class_rps"], r["command"]) for r in rows] == [
        ("slomesh", 5.2, "bench --stacks slomesh,edf"),
        ("llm-d", 4.0, "bench --stacks llm-d,edf"),
        ("edf", 3.3, "bench --stacks slomesh,edf"),  # searched again: replaced
    ]
    text = page.read_text()
    assert "    bench --stacks slomesh,edf" in text and "    bench --stacks llm-d,edf" in text
    # other settings (here the seeds) replace the whole scenario
    update_page(page, "qlm-wa", "one model", "bench --seeds 1", [1], 100, 0.9, flagship[:1])
    rows = json.loads(page.with_suffix(".json").read_text())["qlm-wa"]["rows"]
    assert [r["stack"] for r in rows] == ["slomesh"]
