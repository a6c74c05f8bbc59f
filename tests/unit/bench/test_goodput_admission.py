"""bench-goodput's admission figures: the confusion matrix (rejected requests replayed on the
simulator), the calibrated profile and the simulated ladder with the ingress's admission in the
loop. Everything runs on the simulator; nothing is launched."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

from services.ingress.core.delivered import DeliveredGuardConfig
from shared.domain import HardwareProfile
from shared.profiles.io import load_profiles
from slomesh.bench.goodput.analysis import analyse_system, confusion_table, sim_table
from slomesh.bench.goodput.confusion import (
    Offered,
    _Engine,
    confusion,
    offered_requests,
    would_meet,
)
from slomesh.bench.goodput.harness import result_name
from slomesh.bench.goodput.page import render
from slomesh.bench.goodput.results import REJECTED_REASON
from slomesh.bench.goodput.sim import calibrate, simulate_rate

PROFILE = (
    Path(__file__).resolve().parents[3] / "deploy" / "ray" / "profiles" / "cpu-tiny-llama.json"
)


def profile() -> HardwareProfile:
    return load_profiles(PROFILE)[0]


def poisson(rate: float, seconds: float, out: int = 64, seed: int = 0) -> list[Offered]:
    rng = random.Random(seed)
    t, reqs = 0.0, []
    while True:
        t += rng.expovariate(rate)
        if t > seconds:
            return reqs
        reqs.append(Offered(t, 32, out, "served"))


def test_offered_requests_reads_outcomes_and_relative_arrivals() -> None:
    result = {
        "start_times": [100.0, 100.5, 101.0],
        "input_lens": [128, 128, 128],
        "output_lens": [5, 0, 0],
        "ttfts": [0.1, 0.0, 0.0],
        "latencies": [0.5, 0.0, 0.0],
        "errors": ["", REJECTED_REASON, "Server disconnected"],
    }
    served, rejected, error = offered_requests(result, 256)
    assert (served.outcome, served.arrival_s, served.output_tokens) == ("served", 0.0, 5)
    assert abs(served.tpot_s - 0.1) < 1e-9 and served.ttft_s == 0.1
    assert (rejected.outcome, rejected.arrival_s, rejected.output_tokens) == ("rejected", 0.5, 256)
    assert error.outcome == "error"
    assert offered_requests({}, 256) == []


def test_a_rejection_with_a_free_seat_would_have_met_and_a_full_engine_would_not() -> None:
    prof = profile()
    idle = _Engine(seats=2)
    busy = _Engine(seats=2, spans=[(0.0, 10.0), (0.0, 10.0)])
    r = Offered(1.0, 32, 64, "rejected")
    assert would_meet([r], [idle], prof, 1.0, 0.05) == [True]
    assert would_meet([r], [busy], prof, 1.0, 0.05) == [False]
    assert would_meet([r], [busy], prof, 20.0, 0.05) == [True]  # a seat frees at 10 s


def test_rejections_judged_in_turn_take_the_seats_they_would_have_had() -> None:
    one_seat = _Engine(seats=1)
    both = [Offered(1.0, 32, 512, "rejected"), Offered(1.001, 32, 512, "rejected")]
    assert would_meet(both, [one_seat], profile(), 0.5, 0.05) == [True, False]


def test_confusion_counts_every_offered_request_once() -> None:
    reqs = [
        Offered(0.0, 32, 64, "served", ttft_s=0.1, tpot_s=0.003),
        Offered(0.1, 32, 64, "served", ttft_s=2.0, tpot_s=0.003),
        Offered(0.2, 32, 64, "error"),
        Offered(0.3, 32, 64, "rejected"),
    ]
    c = confusion(reqs, profile(), 1, 16, 1.0, 0.05)
    assert (c.admitted_met, c.admitted_missed) == (1, 2)
    assert c.rejected_would_meet + c.rejected_would_miss == 1 and c.offered == 4
    assert c.rejected_would_meet == 1  # two in flight on 16 seats: room for it
    assert c.false_rejection_share == 0.25


def test_calibration_scales_the_profile_to_the_live_time_per_token() -> None:
    prof = profile()
    reqs = poisson(2.0, 10.0)
    from slomesh.sim.replay import replay_sim, sim_engine_config
    from slomesh.sim.trace import TraceRequest

    trace = [
        TraceRequest(f"t{i}", r.arrival_s, r.input_tokens, r.output_tokens)
        for i, r in enumerate(reqs)
    ]
    timings = replay_sim(trace, prof, sim_engine_config(16, 8192, 16))
    live = [
        replace(r, ttft_s=t.ttft_s * 3 + 0.2, tpot_s=t.tpot_s * 3)
        for r, t in zip(reqs, timings, strict=True)
    ]
    cal = calibrate(prof, live, 1, 16)
    assert abs(cal.decode.d4 / prof.decode.d4 - 3.0) < 0.3
    assert cal.submit_overhead_s > 0.1
    assert "calibrated on the live mesh" in cal.source
    assert calibrate(prof, [Offered(0.0, 8, 8, "rejected")], 1, 16) is prof


def test_the_simulated_ladder_rejects_what_would_miss_under_overload() -> None:
    prof = replace(profile(), submit_overhead_s=0.01)
    light = simulate_rate(2, poisson(2.0, 10.0), prof, 1, 16, 1.0, 0.05, DeliveredGuardConfig())
    assert light.rejected == 0 and light.met == light.served == light.offered
    heavy = poisson(300.0, 6.0, out=128)
    free = simulate_rate(300, heavy, prof, 1, 16, 1.0, 0.05, None)
    guarded = simulate_rate(300, heavy, prof, 1, 16, 1.0, 0.05, DeliveredGuardConfig(), 2)
    assert free.rejected == 0 and free.met < free.served
    assert guarded.rejected > 0
    assert guarded.met / guarded.served > free.met / free.served
    assert guarded.goodput_rps > free.goodput_rps


def test_analysis_reads_result_files_and_the_page_shows_it(tmp_path: Path) -> None:
    import json

    rng = random.Random(1)
    starts = sorted(rng.uniform(0, 5) for _ in range(20))
    result = {
        "start_times": starts,
        "input_lens": [32] * 20,
        "output_lens": [64] * 18 + [0, 0],
        "ttfts": [0.05] * 18 + [0.0, 0.0],
        "latencies": [0.05 + 63 * 0.004] * 18 + [0.0, 0.0],
        "errors": [""] * 18 + [REJECTED_REASON] * 2,
    }
    (tmp_path / result_name(5)).write_text(json.dumps(result))
    plan = {"rates": [5, 10], "slo_ttft_ms": 1000, "slo_tpot_ms": 50, "output_len": 64}
    got = analyse_system(1, plan, tmp_path, profile(), 16, 2)
    assert got is not None and [r["rate_rps"] for r in got["rows"]] == [5]
    row = got["rows"][0]
    assert row["admitted_met"] == 18 and row["offered"] == 20
    assert row["rejected_would_meet"] + row["rejected_would_miss"] == 2
    assert "| slomesh-1 |" in confusion_table("slomesh-1", got)
    sim_row = sim_table("slomesh-1", got, {5: 3.6}).splitlines()[2]
    assert "| slomesh-1 |" in sim_row and "3.6" in sim_row
    assert analyse_system(1, plan, tmp_path / "none", profile(), 16, 2) is None
    data = {
        "command": "slomesh bench-goodput",
        "date": "d",
        "cpus": 2,
        "load_average_before": "1",
        "load_average_after": "2",
        "plan": {
            "rates": [5],
            "seconds": 5,
            "input_len": 32,
            "output_len": 64,
            "slo_ttft_ms": 1000,
            "slo_tpot_ms": 50,
            "slo_headers": True,
        },
        "systems": [{"name": "slomesh-1", "steps": []}],
        "analysis": {"slomesh-1": got},
        "before": {"command": "slomesh bench-goodput --old", "date": "b", "systems": []},
    }
    page = render(data)
    assert "## Admission: confusion matrix" in page and "## Simulator vs live" in page
    assert "## Before" in page and "--old" in page
