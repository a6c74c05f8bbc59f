"""QLM paper experiments: registry, CLI wiring, every experiment end to end on a tiny run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from shared.policy import UnknownNameError
from slomesh.bench.experiments import EXPERIMENTS, ExperimentArgs
from slomesh.bench.experiments.base import HEADER_KEYS, thin
from slomesh.bench.scenarios import SCENARIOS
from slomesh.cli.main import main

NAMES = [
    "autoscale-diurnal",
    "lengths-prompts",
    "qlm-ablation-wa",
    "qlm-ablation-wb",
    "qlm-delta",
    "qlm-hetero",
    "qlm-rwt",
    "qlm-rwt-live",
    "qlm-solver",
    "qlm-wa-rates",
    "qlm-wb-rates",
]

# experiment -> result keys it must write besides the common header
EXPECTED_KEYS: dict[str, set[str]] = {
    "qlm-wa-rates": {"scenario", "swept_stream", "rates_rps", "stacks", "points"},
    "qlm-wb-rates": {"scenario", "swept_stream", "rates_rps", "points", "throughput_ratios"},
    "qlm-ablation-wa": {"scenario", "stream_rates_rps", "variants"},
    "qlm-ablation-wb": {"scenario", "stream_rates_rps", "variants"},
    "qlm-hetero": {"model", "instances", "a10_weight", "points"},
    "qlm-rwt": {"burst_rps", "sizes", "points"},
    "qlm-rwt-live": {"scenario", "rate_rps", "snapshot_s", "arrival", "snapshot"},
    "qlm-delta": {"scenario", "stream_rates_rps", "points"},
    "qlm-solver": {"queues", "models", "rows"},
    "autoscale-diurnal": {"day", "rows", "fixed_for_peak"},
    "lengths-prompts": {
        "served_model",
        "max_tokens",
        "rates_rps",
        "split",
        "predictor_metrics",
        "arms",
        "points",
    },
}

TINY = 60


def test_experiments_registry_lists_all_names() -> None:
    assert EXPERIMENTS.names() == NAMES
    assert set(EXPECTED_KEYS) == set(NAMES)
    for name in NAMES:
        exp = EXPERIMENTS.create(name)
        assert exp.name == name
        assert exp.figure.startswith("Fig")
        assert name not in SCENARIOS.names()


def test_experiments_unknown_name_lists_valid_ones() -> None:
    with pytest.raises(UnknownNameError) as err:
        EXPERIMENTS.create("qlm-nope")
    for name in NAMES:
        assert name in str(err.value)


def test_bench_unknown_scenario_lists_scenarios_and_experiments(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["bench", "--scenario", "qlm-nope"]) == 2
    msg = capsys.readouterr().err
    assert "unknown scenario or experiment 'qlm-nope'" in msg
    for name in [*NAMES, *SCENARIOS.names()]:
        assert name in msg


def test_bench_help_lists_scenarios_and_experiments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    text = "".join(capsys.readouterr().out.split())  # argparse wraps lines at hyphens
    for name in [*NAMES, *SCENARIOS.names()]:
        assert name in text


def test_bench_experiment_rejects_scenario_only_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--scenario", "qlm-rwt", "--rate", "3"]) == 2
    assert "--rate" in capsys.readouterr().err


def test_experiment_args_validate() -> None:
    with pytest.raises(ValueError, match="requests"):
        ExperimentArgs(requests=0)
    with pytest.raises(ValueError, match="seed"):
        ExperimentArgs(seed=-1)


def test_thin_keeps_first_and_last() -> None:
    assert thin([1, 2, 3, 4, 5], 2) == [1, 5]
    assert thin([1, 2, 3, 4, 5], 3) == [1, 3, 5]
    assert thin([1, 2], 5) == [1, 2]
    assert thin([1, 2, 3], None) == [1, 2, 3]


def _read(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "results.json").read_text(encoding="utf-8"))
    return data


@pytest.mark.parametrize("name", NAMES)
def test_experiment_runs_end_to_end(name: str, tmp_path: Path) -> None:
    out = tmp_path / name
    lines: list[str] = []
    args = ExperimentArgs(out_dir=out, seed=1, requests=TINY, max_points=2)
    returned = EXPERIMENTS.create(name).run(args, echo=lines.append)
    data = _read(out)
    assert data == returned
    assert set(HEADER_KEYS) | EXPECTED_KEYS[name] <= set(data)
    assert data["experiment"] == name
    assert data["seed"] == 1
    assert data["requests"] == TINY
    assert data["figures"], "at least one figure"
    for fig in data["figures"]:
        png = out / fig
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "summary.md").read_text(encoding="utf-8")
    assert md.startswith(f"# {name} (QLM paper Fig")
    assert "|" in md
    assert md.strip() in "\n".join(lines)


def test_sweep_points_cover_every_stack_and_rate(tmp_path: Path) -> None:
    args = ExperimentArgs(out_dir=tmp_path, requests=TINY, max_points=2)
    data = EXPERIMENTS.create("qlm-wb-rates").run(args, echo=lambda _: None)
    assert data["rates_rps"] == [0.5, 4.0]
    got = {(p["x"], p["stack"]) for p in data["points"]}
    assert got == {(r, p) for r in (0.5, 4.0) for p in ("vllm-fcfs", "edf", "oracle", "qlm")}
    for p in data["points"]:
        assert p["requests"] == TINY
        assert 0.0 <= p["slo_attainment"] <= 1.0
    assert [r["x"] for r in data["throughput_ratios"]] == [0.5, 4.0]


def test_bench_cli_runs_an_experiment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "solver"
    argv = ["bench", "--scenario", "qlm-solver", "--requests", "200", "--out", str(out)]
    code = main([*argv, "--seed", "3", "--no-progress"])
    assert code == 0
    assert "# qlm-solver (QLM paper Fig. 20)" in capsys.readouterr().out
    data = _read(out)
    assert data["seed"] == 3
    assert {r["queued_requests"] for r in data["rows"]} == {200}
    assert {r["solver"] for r in data["rows"]} == {"ilp", "heuristic"}
