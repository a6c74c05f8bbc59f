"""bench-agree --scenario --sim-seeds: the simulated side runs once per seed (the live view's
report delays and probe phase, the ingress routing's ties), the row is the median seed's run
and the report keeps every seed's attainment, as without a scenario."""

from __future__ import annotations

import json
from pathlib import Path

from slomesh.cli.bench_agree_args import command_line
from slomesh.cli.main import build_parser, main


def test_a_scenario_simulates_each_seed_and_keeps_the_median(tmp_path: Path) -> None:
    out = tmp_path / "agree"
    argv = [
        "bench-agree",
        "--scenario",
        "many-models",
        "--stacks",
        "vllm-fcfs-static,serve-multiplex",
    ]
    argv += ["--requests", "12", "--rate", "1", "--sim-only", "--sim-seeds", "0,1,2"]
    assert main([*argv, "--out", str(out)]) == 0
    report = json.loads((out / "agree.json").read_text())
    pcts = report["sim_seeds_pct"]["vllm-fcfs-static"]
    assert len(pcts) == 3
    row = next(
        r for r in report["rows"] if r["stack"] == "vllm-fcfs-static" and r["class_name"] == "all"
    )
    assert row["sim_pct"] == sorted(pcts)[1]


def test_the_pages_command_line_names_the_seeds_and_the_reused_live_run() -> None:
    """A page re-simulated on a stored live run names how it was made."""
    argv = ["bench-agree", "--scenario", "many-models", "--stacks", "a,b", "--sim-seeds", "0,1"]
    args = build_parser().parse_args([*argv, "--reuse-live", "runs/x", "--page", "p.md"])
    args.stacks, args.sim_seeds = ["a", "b"], [0, 1]  # as `run` splits them
    line = command_line(args)
    assert "--scenario many-models" in line
    assert "--sim-seeds 0,1" in line and "--reuse-live runs/x" in line
    assert "--classes" not in line  # the scenario fixes its trace's classes
