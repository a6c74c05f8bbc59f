"""bench-mesh --compare: its pure parts (statistics, compare.json's shape, the reason printed
when a system cannot start), with test doubles for processes and clocks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slomesh.bench.compare.cpu import CpuSplit, is_engine_process, run_queue_wait_s
from slomesh.bench.compare.run import Plan, parse_systems, run_system, slomesh_config
from slomesh.bench.compare.stats import (
    SystemResult,
    compare_json,
    decode_slope_ms,
    format_table,
    pct_ms,
    ratio,
    span_breakdown,
)
from slomesh.bench.compare.systems import (
    NotStarted,
    SystemSpec,
    bare_vllm_cli,
    launch,
)

SCHEMA_KEYS = {
    "name",
    "engines",
    "ran",
    "why_not",
    "first_token_p50_ms",
    "first_token_p99_ms",
    "decode_ms_per_token",
    "req_s_c8",
    "tok_s_c8",
    "startup_s",
}


@pytest.mark.parametrize(
    ("sweep", "want"),
    [
        ({1: [0.010], 9: [0.026]}, 2.0),  # 16 ms more for 8 more tokens
        ({1: [0.010, 0.012, 0.011], 5: [0.019, 0.019, 0.5], 9: [0.027]}, 2.0),  # medians
        ({4: [0.1]}, None),  # one point: no slope
        ({}, None),
    ],
)
def test_decode_slope_is_the_fitted_ms_per_token(sweep, want):
    got = decode_slope_ms(sweep)
    assert got == pytest.approx(want) if want is not None else got is None


@pytest.mark.parametrize(
    ("xs", "q", "want"),
    [([0.001, 0.002, 0.003], 50, 2.0), ([], 50, None), ([float("nan"), 0.004], 99, 4.0)],
)
def test_percentiles_in_ms_skip_missing(xs, q, want):
    got = pct_ms(xs, q)
    assert got == pytest.approx(want) if want is not None else got is None


@pytest.mark.parametrize(
    ("value", "base", "want"), [(3.0, 1.5, 2.0), (None, 1.0, None), (1.0, 0.0, None)]
)
def test_ratio(value, base, want):
    assert ratio(value, base) == want


def _ran(name: str, engines: int, first: float, step: float) -> SystemResult:
    return SystemResult(
        name,
        engines,
        ran=True,
        startup_s=20.0,
        first_token_s=[first] * 10,
        total16_s=[first + 15 * step] * 5,
        sweep_s={1: [first], 33: [first + 32 * step]},
        c8_requests=600,
        c8_tokens=19200,
        c8_seconds=30.0,
        cpu_outside_engine_s=6.0,
    )


def test_compare_json_has_exactly_the_issue_schema():
    results = [
        _ran("bare-vllm", 1, 0.006, 0.0016),
        SystemResult("ray-serve-llm", 1, why_not="missing packages pyarrow"),
        _ran("slomesh", 2, 0.030, 0.0029),
    ]
    doc = json.loads(json.dumps(compare_json(results, 10.0)))
    assert set(doc) == {"systems", "admission_capacity_rps"}
    assert [set(s) for s in doc["systems"]] == [SCHEMA_KEYS] * 3
    bare, peer, mesh = doc["systems"]
    assert (bare["name"], bare["engines"], bare["ran"], bare["why_not"]) == (
        "bare-vllm",
        1,
        True,
        None,
    )
    assert bare["first_token_p50_ms"] == pytest.approx(6.0)
    assert mesh["decode_ms_per_token"] == pytest.approx(2.9)
    assert mesh["req_s_c8"] == pytest.approx(20.0) and mesh["tok_s_c8"] == pytest.approx(640.0)
    assert peer["ran"] is False and peer["why_not"] == "missing packages pyarrow"
    assert peer["first_token_p50_ms"] is None and peer["startup_s"] is None
    assert doc["admission_capacity_rps"] == 10.0


def test_table_shows_added_latency_ratios_and_who_did_not_run():
    results = [
        _ran("bare-vllm", 1, 0.006, 0.0016),
        SystemResult("ray-serve-llm", 1, why_not="exited with status 3: no pyarrow"),
        _ran("slomesh", 2, 0.030, 0.0032),
    ]
    table = format_table(results)
    assert "+24.0 / +24.0" in table  # slomesh's added first-token latency over bare vLLM
    assert "3.20 (2.00x)" in table  # decode per token and its ratio
    assert "0.0100" in table  # 6 CPU s over 600 requests
    assert "ray-serve-llm: did not run: exited with status 3: no pyarrow" in table


def _span(name: str, start: str, end: str, **attrs: float) -> str:
    return json.dumps({"name": name, "start_time": start, "end_time": end, "attributes": attrs})


def test_span_breakdown_by_name_window_and_ms_attributes():
    lines = [
        _span(
            "admission",
            "2026-01-01T00:00:00.000000Z",
            "2026-01-01T00:00:00.004000Z",
            **{"slomesh.ttft_slo_ms": 20000.0},  # a target, not a measurement: left out
        ),
        _span("admission", "2026-01-01T00:00:01.000000Z", "2026-01-01T00:00:01.002000Z"),
        _span(
            "execution",
            "2026-01-01T00:00:01.000000Z",
            "2026-01-01T00:00:01.010000Z",
            **{"slomesh.queue_and_prefill_ms": 3.0},
        ),
        _span("admission", "2026-01-01T00:10:00.000000Z", "2026-01-01T00:10:00.100000Z"),
        "not json",
        '{"name": "broken"}',
    ]
    t0 = 1767225600.0  # 2026-01-01T00:00:00Z
    spans = span_breakdown(lines, (t0, t0 + 60))
    assert set(spans) == {"admission", "execution", "execution.slomesh.queue_and_prefill_ms"}
    assert spans["admission"]["n"] == 2
    assert spans["admission"]["p50_ms"] == pytest.approx(3.0, abs=1e-3)
    assert spans["execution"]["p50_ms"] == pytest.approx(10.0, abs=1e-3)
    assert spans["execution.slomesh.queue_and_prefill_ms"]["p50_ms"] == pytest.approx(3.0)
    assert span_breakdown(lines)["admission"]["n"] == 3  # no window: all of them


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("bare-vllm,ray-serve-llm", ["bare-vllm", "ray-serve-llm", "slomesh"]),
        ("ray-serve-llm", ["ray-serve-llm", "slomesh"]),
        ("", ["slomesh"]),
        ("slomesh-1,bare-vllm", ["bare-vllm", "slomesh-1", "slomesh"]),
        ("slomesh-proxy,ray-serve-llm", ["ray-serve-llm", "slomesh-proxy", "slomesh"]),
        ("slomesh-no-priority,bare-vllm", ["bare-vllm", "slomesh-no-priority", "slomesh"]),
    ],
)
def test_parse_systems_orders_and_always_measures_slomesh(text, want):
    assert parse_systems(text) == want


def test_parse_systems_names_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown system.*tgi.*valid: bare-vllm, ray-serve-llm"):
        parse_systems("bare-vllm,tgi")


def test_bare_vllm_cli_spells_engine_arguments_as_flags():
    cmd = bare_vllm_cli(
        {"model": "/m", "max_num_seqs": 16, "enforce_eager": True, "enable_prefix_caching": False},
        8001,
    )
    assert cmd[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    joined = " ".join(cmd)
    assert "--model /m --max-num-seqs 16 --enforce-eager --no-enable-prefix-caching" in joined
    assert joined.endswith("--port 8001 --disable-log-stats")


@pytest.mark.parametrize(
    ("name", "cmdline", "engine"),
    [
        ("VLLM::EngineCore", [], True),
        ("python", ["VLLM::Worker"], True),
        ("ray::ServeReplica:replica-0:ReplicaDeployment", [], False),
        ("python", ["-m", "vllm.entrypoints.openai.api_server"], False),
    ],
)
def test_engine_processes_by_title(name, cmdline, engine):
    assert is_engine_process(name, cmdline) is engine


@pytest.mark.parametrize(
    ("name", "cmdline", "title"),
    [
        ("x", ["ray::ServeReplica:predictor:P"], "ray::ServeReplica:predictor:P"),
        ("x", ["ray::ServeReplica:predictor:P.handle_request"], "ray::ServeReplica:predictor:P"),
        ("x", ["ray::ServeController.listen_for_change"], "ray::ServeController"),
        ("VLLM::EngineCore", [], "VLLM::EngineCore"),
        ("python3", ["/bin/python3", "-m", "vllm.api"], "python3 vllm.api"),
    ],
)
def test_a_process_keeps_its_label_whatever_method_it_runs(name, cmdline, title):
    from slomesh.bench.compare.cpu import _title

    assert _title(name, cmdline) == title


def test_cpu_split_difference():
    assert CpuSplit(5.0, 9.0).minus(CpuSplit(1.0, 4.0)) == CpuSplit(4.0, 5.0)
    later, earlier = CpuSplit(5.0, 9.0, engine_wait_s=2.5), CpuSplit(1.0, 4.0, engine_wait_s=1.0)
    assert later.minus(earlier).engine_wait_s == 1.5


def test_run_queue_wait_is_the_second_schedstat_field_of_the_main_thread(tmp_path: Path):
    for tid, stat in (("40", "900 2500000000 7\n"), ("41", "10 500000000 2\n")):
        (tmp_path / "40" / "task" / tid).mkdir(parents=True)
        (tmp_path / "40" / "task" / tid / "schedstat").write_text(stat)
    (tmp_path / "43" / "task" / "43").mkdir(parents=True)
    (tmp_path / "43" / "task" / "43" / "schedstat").write_text("")
    assert run_queue_wait_s(40, tmp_path) == pytest.approx(2.5)  # thread 41 is not the main one
    assert run_queue_wait_s(41, tmp_path) == 0.0  # no such process
    assert run_queue_wait_s(43, tmp_path) == 0.0  # no schedstat kept


class _Proc:
    """A process double: exits with `rc` after `polls_alive` polls (never, when None)."""

    def __init__(self, rc: int | None, polls_alive: int = 0) -> None:
        self.pid = 999_999_999  # no such process: stop() finds nothing to signal
        self.rc, self.left = rc, polls_alive

    def poll(self) -> int | None:
        if self.rc is None:
            return None
        if self.left > 0:
            self.left -= 1
            return None
        return self.rc

    def wait(self, timeout: float | None = None) -> int:
        self.rc = 0 if self.rc is None else self.rc
        self.left = 0
        return self.rc


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def _spec(**kw: object) -> SystemSpec:
    return SystemSpec("ray-serve-llm", 1, ["x"], "http://127.0.0.1:1/v1", "m", **kw)  # type: ignore[arg-type]


def _popen_writing(stderr_text: str, proc: _Proc):
    def popen(cmd, stdout, stderr, env, start_new_session):
        stderr.write(stderr_text.encode())
        return proc

    return popen


@pytest.mark.parametrize(
    ("spec", "proc", "stderr", "ready", "reason"),
    [
        (
            _spec(missing=("pyarrow", "pandas")),
            _Proc(None),
            "",
            True,
            "missing packages pyarrow, pandas (pip install -e '.[bench]')",
        ),
        (
            _spec(),
            _Proc(3, polls_alive=2),
            "starting\nModuleNotFoundError: No module named 'pyarrow'\nbye\n",
            False,
            "exited with status 3: ModuleNotFoundError: No module named 'pyarrow'",
        ),
        (_spec(), _Proc(1), "", False, "exited with status 1"),
        (
            _spec(ready_timeout_s=5.0),
            _Proc(None),
            "loading\nweights 1/2\nError in a warning\nweights 2/2\n",
            False,
            "no answer within 5 s; no answer: weights 1/2 | Error in a warning | weights 2/2",
        ),
    ],
)
def test_a_system_that_cannot_start_says_why(tmp_path: Path, spec, proc, stderr, ready, reason):
    clock = _Clock()
    with pytest.raises(NotStarted) as err:
        launch(spec, tmp_path, lambda s: ready, _popen_writing(stderr, proc), clock, clock.sleep)
    assert str(err.value) == reason


def test_a_server_already_at_the_address_is_not_measured(tmp_path: Path):
    started: list[object] = []

    def popen(*args: object, **kwargs: object) -> _Proc:
        started.append(args)
        return _Proc(None)

    with pytest.raises(NotStarted, match="already answers at http://"):
        launch(_spec(), tmp_path, lambda s: True, popen, _Clock(), _Clock().sleep)
    assert started == []


def test_launch_times_start_up_until_the_first_answer(tmp_path: Path):
    clock = _Clock()
    answers = iter([False, False, False, False, True])
    running = launch(
        _spec(),
        tmp_path,
        lambda s: next(answers),
        _popen_writing("", _Proc(None)),
        clock,
        clock.sleep,
    )
    assert running.startup_s == pytest.approx(3.0)


def test_run_system_reports_the_reason_and_goes_on(tmp_path: Path):
    said: list[str] = []

    def launcher(spec, log_dir, ready):
        raise NotStarted("exited with status 3: ray.serve.llm cannot be imported")

    result, windows = run_system(_spec(), Plan(), tmp_path, said.append, launcher)
    assert (result.ran, result.why_not, windows) == (
        False,
        "exited with status 3: ray.serve.llm cannot be imported",
        {},
    )
    assert (
        said[-1]
        == "== ray-serve-llm: cannot run: exited with status 3: ray.serve.llm cannot be imported"
    )


def test_slomesh_config_sends_every_service_spans_to_one_file(tmp_path: Path):
    config = {"applications": [{"name": "ingress", "args": {"x": 1}}, {"name": "scheduler"}]}
    out = slomesh_config(config, tmp_path / "t.jsonl")
    assert [a["args"]["tracing"]["file_path"] for a in out["applications"]] == [
        str(tmp_path / "t.jsonl")
    ] * 2
    assert "tracing" not in config["applications"][0]["args"]  # the input is left alone


def test_slomesh_config_with_one_engine_drops_the_other_replicas_everywhere(tmp_path: Path):
    def rep(i: int) -> dict:
        return {"application": f"replica-{i}", "gpu": "cpu", "model": "m"}

    config = {
        "applications": [
            {"name": "replica-0", "args": {}},
            {"name": "replica-1", "args": {}},
            {"name": "scheduler", "args": {"replicas": [rep(0), rep(1)]}},
            {"name": "ingress", "args": {}},
        ]
    }
    one = slomesh_config(config, tmp_path / "t.jsonl", engines=1)
    assert [a["name"] for a in one["applications"]] == ["replica-0", "scheduler", "ingress"]
    assert one["applications"][1]["args"]["replicas"] == [rep(0)]
    both = slomesh_config(config, tmp_path / "t.jsonl")  # 0: every replica kept
    assert len(both["applications"]) == 4
    assert len(config["applications"][2]["args"]["replicas"]) == 2  # input left alone
