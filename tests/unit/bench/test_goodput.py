"""bench-goodput: the harness's ladder arguments, reading vLLM's result files, the table, the
targets, the page, and what a system that cannot start or a failing harness leave (test doubles
for processes; nothing is launched)."""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from slomesh.bench.compare.cpu import CpuSplit
from slomesh.bench.compare.run import (
    variant_settings,
    with_engine_settings,
    without_engine_priority,
)
from slomesh.bench.compare.systems import NotStarted, Running, SystemSpec
from slomesh.bench.goodput.cpu_rates import CpuSample
from slomesh.bench.goodput.harness import parse_rates, result_name, step_args
from slomesh.bench.goodput.page import render, target_lines, write_page
from slomesh.bench.goodput.results import (
    REJECTED_REASON,
    Step,
    format_table,
    step_from_result,
    step_json,
    step_of_json,
    table_rows,
)
from slomesh.bench.goodput.run import Plan, harness_command, measure, run_system
from slomesh.cli.bench_goodput import parse_systems, parse_urls
from slomesh.cli.errors import UsageError


def vllm_result(
    completed: int, errors: list[str], goodput: float, duration: float = 10.0
) -> dict[str, object]:
    """The fields of vLLM's detailed result file that bench-goodput reads."""
    return {
        "completed": completed,
        "errors": errors,
        "duration": duration,
        "request_goodput": goodput,
        "median_ttft_ms": 12.0,
        "p99_ttft_ms": 900.0,
        "median_tpot_ms": 4.5,
        "p99_tpot_ms": 9.0,
    }


def step(system: str, rate: float, offered: int, served: int, met: int, dur: float = 10) -> Step:
    return Step(system, rate, offered, served, offered - served, 0, met, met / dur, dur, 1, 2, 3, 4)


def test_parse_rates_accepts_a_ladder_and_names_bad_items() -> None:
    assert parse_rates("10, 20,2.5,") == [10.0, 20.0, 2.5]
    with pytest.raises(ValueError, match="'x' is not a number"):
        parse_rates("10,x")
    with pytest.raises(ValueError, match="> 0, got 0"):
        parse_rates("0")
    with pytest.raises(ValueError, match="at least one"):
        parse_rates(" , ")


def test_step_args_size_each_rate_and_warm_up_only_first(tmp_path: Path) -> None:
    base = argparse.Namespace(request_rate=float("inf"), num_prompts=1000, num_warmups=4)
    first = step_args(base, 30.0, 20.0, tmp_path, first=True)
    later = step_args(base, 2.5, 20.0, tmp_path, first=False)
    assert (first.request_rate, first.num_prompts, first.num_warmups) == (30.0, 600, 4)
    assert (later.num_prompts, later.num_warmups) == (50, 0)
    assert later.result_filename == "rate-2.5.json" == result_name(2.5)
    assert later.save_detailed and later.save_result and later.result_dir == str(tmp_path)
    assert base.num_prompts == 1000 and base.num_warmups == 4  # the base is not changed


def test_harness_command_carries_the_slo_as_goodput_and_as_headers(tmp_path: Path) -> None:
    plan = Plan(rates=(10.0, 20.0), slo_ttft_ms=1000, slo_tpot_ms=50)
    cmd = harness_command(plan, "http://127.0.0.1:8100/v1", "tiny-llama", "/m", tmp_path)
    text = " ".join(cmd)
    assert "--rates 10,20 --seconds 20" in text
    assert "--base-url http://127.0.0.1:8100 --endpoint /v1/completions" in text
    assert "--goodput ttft:1000 tpot:50" in text
    assert "--random-input-len 128 --random-output-len 256 --ignore-eos" in text
    assert cmd[-3:] == ["--header", "x-slo-ttft-ms=1000", "x-slo-tpot-ms=50"]
    no_headers = harness_command(
        Plan(rates=(1.0,), slo_headers=False), "http://h/v1", "m", "t", tmp_path
    )
    assert "--header" not in no_headers and "ttft:1000" in no_headers


def test_step_counts_429s_apart_from_other_failures() -> None:
    errors = ["", "", REJECTED_REASON, REJECTED_REASON, "Internal Server Error", ""]
    s = step_from_result("slomesh", 30.0, vllm_result(3, errors, goodput=0.2))
    assert (s.offered, s.served, s.rejected, s.errors, s.met) == (6, 3, 2, 1, 2)
    assert s.met_of_served == pytest.approx(2 / 3)
    assert step_of_json(json.loads(json.dumps(step_json(s)))) == s


def test_step_without_goodput_counts_none_met() -> None:
    result = vllm_result(2, ["", ""], goodput=0.0)
    result["request_goodput"] = None  # vLLM writes None when run without --goodput
    assert step_from_result("bare-vllm", 1.0, result).met == 0


def test_table_orders_by_rate_and_divides_by_bare() -> None:
    steps = [
        step("bare-vllm", 10, 200, 200, 200),
        step("slomesh", 10, 200, 180, 170),
        step("bare-vllm", 20, 400, 400, 100),
        step("slomesh", 20, 400, 300, 280),
    ]
    rows = table_rows(steps)
    assert [(r[0], r[1]) for r in rows] == [
        ("bare-vllm", "10"),
        ("slomesh", "10"),
        ("bare-vllm", "20"),
        ("slomesh", "20"),
    ]
    assert rows[1][3] == "0.85" and rows[3][3] == "2.80"
    assert rows[3][6] == "100" and rows[3][8] == "93"  # rejected; met of served, percent
    assert "rejected (429)" in format_table(steps)


def test_targets_name_what_is_met_and_what_is_not() -> None:
    steps = [
        step("bare-vllm", 10, 200, 200, 200),  # meets the SLO: 100%
        step("bare-vllm", 20, 400, 400, 100),  # collapsed: 25%
        step("slomesh", 10, 200, 180, 170),  # 0.85x at a rate bare serves: not met
        step("slomesh", 20, 400, 300, 280),  # 28 req/s >= 0.8 x 20, 93% met of served: met
    ]
    lines = target_lines(steps)
    assert lines[0].startswith("slomesh at 10 req/s") and lines[0].endswith("NOT met")
    assert lines[1].startswith("slomesh at 20 req/s (>= 2x 10)") and lines[1].endswith(": met")
    short = target_lines([s for s in steps if s.rate_rps == 10])
    assert short[-1] == "slomesh: no rate >= 20 req/s (2x the rate bare serves) on the ladder"
    beyond = [*steps, step("bare-vllm", 30, 600, 600, 60), step("slomesh", 30, 600, 200, 190)]
    assert target_lines(beyond)[1].startswith("slomesh at 20 req/s (>= 2x 10)")


def page_data() -> dict[str, object]:
    plan = Plan(rates=(10.0, 20.0))
    return {
        "command": "slomesh bench-goodput --rates 10,20",
        "date": "2026-01-01 00:00 UTC",
        "commit": "abc1234",
        "cpus": 2,
        "load_average_before": "1.00 1.00 1.00",
        "load_average_after": "2.00 2.00 2.00",
        "plan": plan.__dict__ | {"rates": list(plan.rates)},
        "systems": [
            {
                "name": "bare-vllm",
                "startup_s": 30.0,
                "why_not": None,
                "cpu_engine_s": 61.0,
                "cpu_outside_s": 9.0,
                "steps": [step_json(step("bare-vllm", 10, 200, 200, 200))],
            },
            {"name": "ray-serve-llm", "startup_s": None, "why_not": "missing pyarrow", "steps": []},
        ],
    }


def test_page_states_the_command_the_reasons_and_the_table(tmp_path: Path) -> None:
    text = render(page_data())
    assert "slomesh bench-goodput --rates 10,20" in text
    assert "**ray-serve-llm**: missing pyarrow" in text
    assert "bare-vllm 61 s in vLLM's engine cores, 9 s outside them" in text
    table = text.split("![goodput]")[0]
    assert "rejected (429)" in table and "bare-vllm" in table.split("rejected (429)")[1]
    written = write_page(page_data(), tmp_path / "goodput.md")
    assert [p.name for p in written] == ["goodput.md", "goodput.json", "goodput.png"]
    assert (tmp_path / "goodput.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((tmp_path / "goodput.json").read_text())["commit"] == "abc1234"


def test_measure_reads_what_the_harness_wrote_and_says_what_is_missing(tmp_path: Path) -> None:
    plan = Plan(rates=(10.0, 20.0))

    def runner(cmd: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        result_dir = Path(cmd[cmd.index("--result-dir") + 1])
        result_dir.mkdir(parents=True, exist_ok=True)
        (result_dir / "rate-10.json").write_text(json.dumps(vllm_result(5, [""] * 5, 0.5)))
        print("rate 20 failed: boom", file=_["stdout"])  # type: ignore[arg-type]
        return subprocess.CompletedProcess(cmd, 1)

    steps, why = measure("slomesh", "http://127.0.0.1:8100/v1", "m", "t", plan, tmp_path, runner)
    assert [s.rate_rps for s in steps] == [10.0]
    assert why is not None and "status 1" in why and "boom" in why


def test_a_system_that_cannot_start_is_reported_not_raised(tmp_path: Path) -> None:
    spec = SystemSpec("ray-serve-llm", 1, ["x"], "http://127.0.0.1:8002/v1", "m")

    def launcher(*_: object, **__: object) -> object:
        raise NotStarted("missing packages pyarrow")

    def runner(*_: object, **__: object) -> object:
        raise AssertionError("the harness must not run")

    run = run_system(spec, Plan(rates=(1.0,)), "t", tmp_path, lambda _: None, launcher, runner)
    assert run.why_not == "missing packages pyarrow" and run.steps == []


def test_cli_parses_systems_and_urls() -> None:
    assert parse_systems("slomesh, bare-vllm,slomesh") == ["slomesh", "bare-vllm"]
    assert parse_systems("slomesh-no-priority,slomesh") == ["slomesh-no-priority", "slomesh"]
    with pytest.raises(UsageError, match="unknown system"):
        parse_systems("vllm")
    assert parse_systems("bare-vllm,slomesh+batch+pin") == ["bare-vllm", "slomesh+batch+pin"]
    with pytest.raises(UsageError, match="valid: nice-5"):
        parse_systems("slomesh+fast")
    with pytest.raises(UsageError, match="unknown system"):
        parse_systems("bare-vllm+batch")
    assert parse_urls(["peer=http://h:1/v1"]) == [("peer", "http://h:1/v1")]
    with pytest.raises(UsageError, match="NAME=http"):
        parse_urls(["h:1"])


class _Exited:
    """A started system's process double that has already exited (stop() signals nothing)."""

    pid = 999_999_999

    def poll(self) -> int:
        return 0

    def wait(self, timeout: float | None = None) -> int:
        return 0


def test_a_started_system_gets_its_steps_and_the_cpu_of_its_ladder(tmp_path: Path) -> None:
    spec = SystemSpec("slomesh", 2, ["x"], "http://127.0.0.1:8100/v1", "tiny-llama")
    samples = iter([CpuSplit(10.0, 5.0), CpuSplit(70.0, 125.0)])

    def launcher(*_: object, **__: object) -> Running:
        return Running(spec, _Exited(), 42.0, tmp_path)

    def runner(cmd: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        assert "x-slo-ttft-ms=1000" in cmd
        result_dir = Path(cmd[cmd.index("--result-dir") + 1])
        result_dir.mkdir(parents=True, exist_ok=True)
        (result_dir / "rate-10.json").write_text(json.dumps(vllm_result(5, [""] * 5, 0.5)))
        return subprocess.CompletedProcess(cmd, 0)

    run = run_system(
        spec, Plan(rates=(10.0,)), "t", tmp_path, lambda _: None, launcher, runner,
        lambda _pid: next(samples),
    )  # fmt: skip
    assert run.why_not is None and run.startup_s == 42.0
    assert [(s.system, s.served, s.met) for s in run.steps] == [("slomesh", 5, 5)]
    assert (run.cpu_engine_s, run.cpu_outside_s) == (60.0, 120.0)
    assert run.load_average is not None
    assert all(len(a.split()) == 3 for a in run.load_average)  # 1, 5, 15 min, before and after


class _Samples:
    """A CPU sampler double: the samples it 'took' over the ladder, given by the test."""

    def __init__(self, samples: list[CpuSample]) -> None:
        self.samples, self.running = samples, False

    def start(self) -> None:
        self.running = True

    def stop(self) -> list[CpuSample]:
        assert self.running
        return self.samples


def test_a_started_system_gets_the_cores_busy_at_each_rate(tmp_path: Path) -> None:
    spec = SystemSpec("slomesh", 1, ["x"], "http://127.0.0.1:8100/v1", "tiny-llama")
    end = time.mktime(time.strptime("20260101-120030", "%Y%m%d-%H%M%S")) + 0.5
    samples = [CpuSample(end - 9.0 + i, 0.8 * i, 0.5 * i) for i in range(9)]

    def runner(cmd: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        result_dir = Path(cmd[cmd.index("--result-dir") + 1])
        result_dir.mkdir(parents=True, exist_ok=True)
        result = vllm_result(5, [""] * 5, 0.5) | {"date": "20260101-120030"}
        (result_dir / "rate-10.json").write_text(json.dumps(result))
        return subprocess.CompletedProcess(cmd, 0)

    run = run_system(
        spec, Plan(rates=(10.0,)), "t", tmp_path, lambda _: None,
        lambda *_, **__: Running(spec, _Exited(), 1.0, tmp_path), runner,
        lambda _pid: CpuSplit(0.0, 0.0), lambda _pid: _Samples(samples),
    )  # fmt: skip
    assert run.cpu_by_rate == [
        {
            "rate_rps": 10.0,
            "engine_cores": 0.8,
            "outside_cores": 0.5,
            "engine_wait_cores": 0.0,
            "seconds": 8.0,
        }
    ]


def test_answers_held_back_and_delivered_at_once_are_counted_as_bursts() -> None:
    result = vllm_result(4, ["", "", "", "", REJECTED_REASON], goodput=0.3)
    result["ttfts"] = [0.05, 6.0, 2.0, 0.0, 0.0]
    result["latencies"] = [0.55, 6.02, 2.01, 0.0, 0.0]  # 2 ms/token; then 0.08 and 0.04 ms/token
    result["output_lens"] = [256, 256, 256, 1, 0]  # one token: no TPOT, no burst
    s = step_from_result("slomesh", 20.0, result)
    assert s.bursts == 2
    assert table_rows([s])[0][-1] == "2"


def test_the_client_runs_at_the_plan_priority_and_a_refusal_is_not_fatal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from slomesh.bench.goodput import harness

    cmd = harness_command(Plan(rates=(10.0,)), "http://h:1/v1", "m", "tok", Path("/tmp/r"))
    assert cmd[cmd.index("--nice") + 1] == "-10" and cmd.index("--nice") < cmd.index("--")
    calls: list[int] = []

    def refuse(n: int) -> int:
        calls.append(n)
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(harness.os, "nice", refuse)
    group = tmp_path / "autogroup"
    harness.raise_priority(0, group)
    assert calls == [] and not group.exists()
    harness.raise_priority(-10, group)
    assert calls == [-10] and "client priority unchanged" in capsys.readouterr().out
    assert not group.exists()  # no autogroups here: nothing written
    group.write_text("/autogroup-1 nice 0")
    harness.raise_priority(-10, group)
    assert group.read_text() == "-10"


def test_the_mesh_without_engine_priority_differs_only_in_its_engines_cpu_settings() -> None:
    config: dict[str, Any] = {
        "applications": [
            {"name": "replica-0", "args": {"engine": "vllm", "vllm": {"model": "m"}}},
            {"name": "replica-1", "args": {"engine": "simulated"}},
            {"name": "ingress", "args": {"slo": {}}},
        ]
    }
    off = without_engine_priority(config)
    assert off["applications"][0]["args"]["vllm"] == {
        "model": "m",
        "engine_nice": None,
        "engine_cpus": None,
        "mesh_sched_policy": None,
    }
    assert off["applications"][1:] == config["applications"][1:]
    assert "engine_nice" not in config["applications"][0]["args"]["vllm"]  # input left alone


def test_a_variant_names_its_engine_settings_in_order() -> None:
    assert variant_settings("slomesh") is None
    assert variant_settings("slomesh-1") is None
    assert variant_settings("slomesh+nice-20") == {"engine_nice": -20}
    both = variant_settings("slomesh+idle+nice-5+batch")
    assert both == {"mesh_sched_policy": "batch", "engine_nice": -5}  # the last part wins
    pin = variant_settings("slomesh+pin")
    assert pin is not None and len(pin["engine_cpus"]) == 1
    assert variant_settings("slomesh+pin+nopin") == {"engine_cpus": None}
    assert variant_settings("slomesh+helpers-rest+rt") == {
        "engine_helpers": "rest",
        "engine_realtime": True,
    }
    assert variant_settings("slomesh+nostats") == {"engine_stats": False}
    assert variant_settings("slomesh+nostats+stats") == {"engine_stats": True}


def test_engine_settings_apply_to_vllm_replicas_only() -> None:
    config: dict[str, Any] = {
        "applications": [
            {"name": "replica-0", "args": {"engine": "vllm", "vllm": {"model": "m"}}},
            {"name": "ingress", "args": {"slo": {}}},
        ]
    }
    on = with_engine_settings(config, {"mesh_sched_policy": "batch", "engine_cpus": [1]})
    want = {"model": "m", "mesh_sched_policy": "batch", "engine_cpus": [1]}
    assert on["applications"][0]["args"]["vllm"] == want
    assert on["applications"][1] == config["applications"][1]
    assert config["applications"][0]["args"]["vllm"] == {"model": "m"}
