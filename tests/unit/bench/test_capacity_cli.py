"""`slomesh bench --capacity`: bad input, the early-stopping probe, the report, one small run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared.metrics.summary import summarize
from shared.report.capacity import CapacityRow, format_capacity_table, write_capacity
from shared.workloads import generate
from slomesh.bench.capacity import CapacitySettings
from slomesh.bench.capacity_run import make_probe
from slomesh.bench.scenarios import SCENARIOS
from slomesh.cli.main import main
from slomesh.sim.simulator import Simulator
from slomesh.stacks import STACKS

BASE = ["bench", "--scenario", "smoke", "--capacity", "--no-progress"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--target", "0"], "target"),
        (["--target", "1.2"], "target"),
        (["--seeds", ","], "seeds"),
        (["--seeds", "a"], "--seeds"),
        (["--bracket", "3"], "--bracket"),
        (["--bracket", "4,2"], "bracket"),
        (["--sweep-rates", "1,2"], "--sweep-rates"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main([*BASE, "--out", str(tmp_path), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1


def test_capacity_on_an_experiment_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--scenario", "qlm-delta", "--capacity"]) == 2
    assert "--capacity" in capsys.readouterr().err


@pytest.mark.parametrize(("policy", "rate"), [("vllm-fcfs", 4.0), ("vllm-fcfs", 200.0)])
def test_early_stop_gives_the_full_runs_verdict(policy: str, rate: float) -> None:
    sc = SCENARIOS.create("smoke")
    settings = CapacitySettings(probe_requests=120)
    bound = make_probe(sc, policy, 0, settings)(rate)
    workload = sc.workload.model_copy(update={"requests": 120}).with_total_rate(rate)
    full = summarize(Simulator(sc.cluster, STACKS.create(policy), generate(workload, 0)).run())
    assert (bound >= 0.9) == (full.slo_attainment >= 0.9)


def test_table_ratios_against_baselines() -> None:
    rows = [
        CapacityRow("vllm-fcfs", 2.0, {0: 2.0, 1: 1.5}),
        CapacityRow("edf", 4.0, {0: 4.0, 1: 4.5}),
        CapacityRow("scorpio", 8.0, {0: 8.0, 1: 7.0}),
    ]
    table = format_capacity_table(rows, 0.9).splitlines()
    assert "x vllm-fcfs" in table[0] and "x edf" in table[0]
    assert table[-1].replace(" ", "").endswith("|8.00|4.00|2.00|")


def test_table_without_baselines_has_no_ratio_columns() -> None:
    table = format_capacity_table([CapacityRow("qlm", 3.0, {0: 3.0})], 0.9)
    assert " x " not in table


def test_write_capacity(tmp_path: Path) -> None:
    rows = [CapacityRow("edf", 4.0, {0: 4.0}, {"stack": "edf", "capacity_rps": 4.0})]
    write_capacity(tmp_path, "smoke", [0], 100, rows, 0.9, {"target": 0.9})
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["results"] == [{"stack": "edf", "capacity_rps": 4.0}]
    assert data["target"] == 0.9
    assert (tmp_path / "capacity.png").stat().st_size > 0
    assert "edf" in (tmp_path / "summary.md").read_text()


@pytest.mark.slow
def test_capacity_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*BASE, "--stacks", "vllm-fcfs,edf", "--seeds", "0,1", "--requests", "100"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["seeds"] == [0, 1]
    for row in data["results"]:
        assert set(row["capacity_rps_by_seed"]) == {"0", "1"}
        assert row["capacity_rps"] > 0
        for search in row["search_by_seed"].values():
            assert search["iterations"] == len(search["probes"]) >= 2
            lo, hi = search["bracket_rps"]
            assert lo is None or hi is None or lo < hi
    assert (tmp_path / "capacity.png").exists()
    assert "x vllm-fcfs" in capsys.readouterr().out


def test_table_marks_unbounded_capacity_as_a_lower_bound() -> None:
    row = CapacityRow("sls", 64.0, {0: 64.0, 1: 8.0}, unbounded_seeds=frozenset({0}))
    table = format_capacity_table([row], 0.9)
    assert ">=64.00" in table and " 8.00 |" in table and ">=8.00" not in table
    assert "lower bound" in table


@pytest.mark.parametrize(
    ("scenario", "setting", "expected"),
    [
        ("smoke", None, 500),  # min(scenario's 500, 1,000)
        ("shared-prefix", None, 4000),  # the scenario asks for longer probes
        ("shared-prefix", 300, 300),  # --requests wins
    ],
)
def test_probe_requests_follow_setting_then_scenario(scenario, setting, expected) -> None:
    from slomesh.bench.capacity_run import probe_requests

    sc = SCENARIOS.create(scenario)
    assert probe_requests(sc, CapacitySettings(probe_requests=setting)) == expected


@pytest.mark.parametrize(
    ("rate", "setting", "expected"),
    [
        (0.5, None, 1000),  # the count: 1,000 requests last 2,000 s at 0.5 r/s
        (4.0, None, 2400),  # 4 r/s for 2 x batch-2's 300 s deadline
        (20.0, None, 12000),
        (4.0, 3000, 3000),  # --requests sets the count; the duration is a floor over it
        (20.0, 3000, 12000),
    ],
)
def test_many_models_probes_last_twice_the_longest_deadline(rate, setting, expected) -> None:
    from slomesh.bench.capacity_run import probe_min_duration_s, probe_requests_at

    sc = SCENARIOS.create("many-models")
    assert probe_min_duration_s(sc) == 600.0
    assert probe_requests_at(sc, CapacitySettings(probe_requests=setting), rate) == expected


def test_scenarios_without_a_duration_rule_probe_by_count_at_every_rate() -> None:
    from slomesh.bench.capacity_run import probe_min_duration_s, probe_requests_at

    sc = SCENARIOS.create("smoke")
    assert probe_min_duration_s(sc) is None
    assert probe_requests_at(sc, CapacitySettings(), 1000.0) == 500


def test_a_probe_at_a_high_rate_simulates_the_longer_run(monkeypatch) -> None:
    import slomesh.bench.capacity_run as run

    seen: list[int] = []
    real = run.generate

    def spy(workload, seed):
        seen.append(workload.requests)
        return real(workload.model_copy(update={"requests": 30}), seed)

    monkeypatch.setattr(run, "generate", spy)
    sc = SCENARIOS.create("many-models")
    probe = run.make_probe(sc, "vllm-fcfs-static", 0, CapacitySettings(probe_requests=10))
    probe(0.01)
    probe(5.0)
    assert seen == [10, 3000]
