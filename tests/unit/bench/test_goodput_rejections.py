"""bench-goodput's account of which admission rule refused at each rate (rejections.py), and
the page's lines on where the goodput short of a target went (page.gap_lines)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from services.ingress.core.delivered import DeliveredGuard
from services.ingress.observer import rejection_kind
from slomesh.bench.compare.cpu import CpuSplit
from slomesh.bench.goodput.cpu_rates import (
    CpuSampler,
    cores_between,
    cpu_by_rate,
    engine_us_per_token,
)
from slomesh.bench.goodput.harness import rate_windows, result_name
from slomesh.bench.goodput.page import gap_lines, render
from slomesh.bench.goodput.rejections import (
    read_rejections,
    rejections_by_rate,
    rejections_table,
)
from slomesh.bench.goodput.results import Step, step_json

END = time.mktime(time.strptime("20260101-120030", "%Y%m%d-%H%M%S"))
"""The local time vLLM stamps the 20 req/s result with below, as unix seconds."""


def span(
    at_s: float,
    reason: str | None,
    name: str = "admission",
    service: str = "slomesh-ingress",
) -> str:
    """One exported span line as the mesh's file exporter writes it."""
    iso = datetime.fromtimestamp(at_s, UTC).isoformat().replace("+00:00", "Z")
    status = {"status_code": "UNSET"}
    if reason is not None:
        status = {"status_code": "ERROR", "description": f"APIError: {reason}"}
    return json.dumps(
        {
            "name": name,
            "start_time": iso,
            "status": status,
            "attributes": {},
            "resource": {"attributes": {"service.name": service}},
        }
    )


TTFT = "predicted TTFT 1.2 s at 13 requests in flight (measured on this mesh) exceeds it"
DRAIN = "overloaded: 13 requests queued ahead drain in ~1.0 s, more than this request may wait"


def results(folder: Path) -> None:
    """Two rates' result files: 10 req/s ended 60 s before 20 req/s; each ran 20 s."""
    folder.mkdir(parents=True)
    for rate, end in ((10.0, "20260101-115930"), (20.0, "20260101-120030")):
        (folder / result_name(rate)).write_text(json.dumps({"date": end, "duration": 20.0}))


def test_windows_cover_each_rates_arrivals_and_skip_results_without_a_date(
    tmp_path: Path,
) -> None:
    results(tmp_path / "r")
    (tmp_path / "r" / result_name(40.0)).write_text(json.dumps({"duration": 3.0}))
    windows = rate_windows(tmp_path / "r", [10.0, 20.0, 40.0, 80.0], 1.0)
    assert sorted(windows) == [10.0, 20.0]
    lo, hi = windows[20.0]
    assert lo <= END - 20.0 and hi >= END + 1.0 and hi - lo < 25.0
    assert windows[10.0][1] < lo  # the rates' windows do not overlap
    assert rate_windows(tmp_path / "r", [20.0])[20.0] == (END + 0.5 - 20.0, END + 0.5)


def test_rejections_are_put_to_their_rate_and_labelled_as_the_metrics_label_them(
    tmp_path: Path,
) -> None:
    results(tmp_path / "r")
    lines = [
        span(END - 10, TTFT),
        span(END - 9, TTFT),
        span(END - 8, DRAIN),
        span(END - 70, TTFT),  # in the 10 req/s window
        span(END - 5, None),  # admitted
        span(END - 5, TTFT, name="request"),  # the request span above it
        span(END - 5, TTFT, service="slomesh-scheduler"),
        span(END - 40, TTFT),  # between the rates
        "{not json",
        "",
    ]
    rows = rejections_by_rate(lines, rate_windows(tmp_path / "r", [10.0, 20.0], 1.0))
    assert [r["rate_rps"] for r in rows] == [10.0, 20.0]
    assert rows[0]["sampled"] == 1 and rows[0]["kinds"] == {"predicted_infeasible": 1}
    assert rows[1]["sampled"] == 3
    assert list(rows[1]["kinds"].items()) == [("predicted_infeasible", 2), ("queue_drain", 1)]
    assert rows[1]["examples"]["queue_drain"] == DRAIN


def test_the_table_shows_the_429s_the_split_and_the_top_reason(tmp_path: Path) -> None:
    results(tmp_path / "r")
    traces = tmp_path / "traces-slomesh.jsonl"
    traces.write_text("\n".join([span(END - 10, TTFT), span(END - 9, DRAIN)]) + "\n")
    found = read_rejections(traces, tmp_path / "r", [10.0, 20.0])
    assert found["sample_ratio"] == pytest.approx(0.1)
    table = rejections_table("slomesh", found, {10.0: 0, 20.0: 250})
    row10, row20 = (
        [c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]
    )
    assert row10 == ["slomesh", "10", "0", "0", "-", "-"]
    assert row20[2:5] == ["250", "2", "predicted_infeasible 1 (50%), queue_drain 1 (50%)"]
    assert row20[5].startswith("predicted TTFT 1.2 s")
    assert read_rejections(tmp_path / "none.jsonl", tmp_path / "r", [10.0])["rows"][0] == {
        "rate_rps": 10.0,
        "sampled": 0,
        "kinds": {},
        "examples": {},
    }


def guard_rejection(tpot: bool) -> str:
    """The reason text of a real rejection by the ingress's guard on delivered latency."""
    g = DeliveredGuard()
    for i in range(6):
        g.start(f"r{i}", "m", 1.0, 0.0)
        g.first_token(f"r{i}", 0.01 if tpot else 2.0)
        if tpot:
            g.end(f"r{i}", 11, 1.01)  # 100 ms per token
    for i in range(6, 12):
        g.start(f"r{i}", "m", 1.0, 1.05)
    verdict = g.check("m", 1.0, 0.05, 0.0, 1.1)
    assert not verdict.admit
    return verdict.reason


@pytest.mark.parametrize("tpot", [False, True])
def test_a_prediction_made_at_some_requests_in_flight_is_not_called_replicas_full(
    tpot: bool,
) -> None:
    reason = guard_rejection(tpot)
    assert "requests in flight" in reason
    assert rejection_kind(reason) == "predicted_infeasible"


def step(system: str, rate: float, offered: int, met: int, tpot_ms: float) -> Step:
    dur = 10.0
    return Step(system, rate, offered, met, offered - met, 0, met, met / dur, dur, 1, 2, tpot_ms, 4)


def gap_data() -> dict[str, object]:
    """bare serves 10 and 20 req/s; slomesh is short at 20 (0.75x) and at 40 (0.5x best)."""
    bare = [step("bare-vllm", 10, 100, 100, 1.0), step("bare-vllm", 20, 200, 200, 1.5)]
    bare.append(step("bare-vllm", 40, 400, 10, 1.6))
    mine = [step("slomesh", 10, 100, 100, 1.1), step("slomesh", 20, 200, 150, 2.0)]
    mine.append(step("slomesh", 40, 400, 100, 2.2))
    rows = [
        {
            "rate_rps": r,
            "offered": 0,
            "admitted_met": 0,
            "admitted_missed": 0,
            "rejected_would_meet": n,
            "rejected_would_miss": 0,
            "false_rejection_share": 0.0,
            "sim_served": 0,
            "sim_met": 0,
            "sim_goodput_rps": 1.0,
        }
        for r, n in ((10.0, 0), (20.0, 10), (40.0, 0))
    ]
    return {
        "command": "slomesh bench-goodput",
        "date": "d",
        "cpus": 2,
        "load_average_before": "1",
        "load_average_after": "2",
        "plan": {"slo_ttft_ms": 1000.0, "slo_tpot_ms": 50.0, "output_len": 64, "input_len": 8}
        | {"rates": [10.0, 20.0, 40.0], "seconds": 10.0, "slo_headers": True},
        "systems": [
            {"name": "bare-vllm", "steps": [step_json(s) for s in bare]},
            {"name": "slomesh", "steps": [step_json(s) for s in mine]},
        ],
        "analysis": {"slomesh": {"rows": rows, "calibration": "c"}},
    }


def test_the_goodput_short_of_a_target_is_split_into_false_rejections_and_the_rest() -> None:
    lines = gap_lines(gap_data())
    assert len(lines) == 2  # 10 req/s meets its target
    assert lines[0].startswith("slomesh at 20 req/s: 5.0 req/s short of bare vLLM's goodput")
    assert "of it, 1.0 req/s the admission turned away" in lines[0]
    assert "the other 4.0 req/s" in lines[0] and "TPOT p50 2.00 ms against bare's 1.50" in lines[0]
    assert lines[1].startswith("slomesh at 40 req/s: 10.0 req/s short of bare vLLM's best")
    assert "bare's 1.50 ms at 20 req/s" in lines[1]
    assert "Where the goodput short of the target went" in render(gap_data())


def test_the_cpu_of_each_rate_comes_from_the_samples_inside_its_run() -> None:
    split = iter(
        [
            CpuSplit(0.0, 0.0),
            CpuSplit(1.0, 0.5, engine_wait_s=0.1),
            CpuSplit(3.0, 1.5, engine_wait_s=0.5),
            CpuSplit(3.1, 1.6, engine_wait_s=0.6),
        ]
    )
    clock = iter([10.0, 11.0, 13.0, 20.0])
    sampler = CpuSampler(7, lambda pid: next(split), 0.0, lambda: next(clock), lambda: 0.0)
    for _ in range(4):
        sampler.sample()
    rows = cpu_by_rate(sampler.samples, {10.0: (10.5, 14.0), 20.0: (15.0, 19.0)})
    assert rows == [
        {
            "rate_rps": 10.0,
            "engine_cores": 1.0,
            "outside_cores": 0.5,
            "engine_wait_cores": 0.2,  # 0.4 s ready but waiting over 2 s
            "seconds": 2.0,
        }
    ]
    assert cores_between(sampler.samples, 9.0, 12.0) is None  # 1 s apart: too short
    assert engine_us_per_token(0.9, 300, 256, 10.0) == pytest.approx(0.9e6 / 7680)
    assert engine_us_per_token(0.9, 0, 256, 10.0) is None


def test_the_sampler_thread_samples_until_stopped() -> None:
    sampler = CpuSampler(7, lambda pid: CpuSplit(float(pid), 0.0), 0.001)
    sampler.start()
    while len(sampler.samples) < 3:
        time.sleep(0.001)
    got = sampler.stop()
    n = len(got)
    time.sleep(0.01)
    assert len(sampler.samples) == n and {s.engine_s for s in got} == {7.0}


def test_the_page_shows_the_cores_per_rate_and_names_them_in_the_shortfall() -> None:
    data = gap_data()
    cores = {"bare-vllm": (20.0, 0.97), "slomesh": (20.0, 0.75)}
    for entry in data["systems"]:  # type: ignore[attr-defined]
        rate, busy = cores[entry["name"]]
        entry["cpu_by_rate"] = [
            {"rate_rps": rate, "engine_cores": busy, "outside_cores": 0.6, "seconds": 9.0}
        ]
    data["systems"][1]["cpu_by_rate"][0]["engine_wait_cores"] = 0.21  # type: ignore[index]
    text = render(data)
    assert "| slomesh   |         20 |              0.75 |             0.60 |" in text
    assert "engine waiting for a core" in text
    cpu_rows = [ln for ln in text.splitlines() if "0.60 |" in ln]
    waits = [ln.split("|")[5].strip() for ln in cpu_rows]
    assert sorted(waits) == ["-", "0.21"]  # a run from before the column: not measured
    assert "engine processes kept 0.75 cores busy, bare's 0.97" in gap_lines(data)[0]
    assert "cores busy" not in gap_lines(data)[1]  # no samples at 40 req/s
