"""The simulator's calibration carried from one sitting to another (sitting.py): the host's
speed in each sitting read from the baseline's decode step, and the calibration's decode plane
scaled by their ratio (nothing is launched)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from shared.profiles.io import load_profiles
from slomesh.bench.goodput.analysis import analyse_system
from slomesh.bench.goodput.confusion import Offered
from slomesh.bench.goodput.delivered_fit import DecodeLine
from slomesh.bench.goodput.harness import result_name
from slomesh.bench.goodput.sitting import (
    baseline_tpot,
    calibration_problem,
    describe,
    host_scale,
    scaled_line,
)
from slomesh.cli.bench_goodput import check_calibration_sitting
from slomesh.cli.errors import UsageError

PROFILE = (
    Path(__file__).resolve().parents[3] / "deploy" / "ray" / "profiles" / "cpu-tiny-llama.json"
)


def test_a_one_rate_sitting_cannot_calibrate_another(tmp_path: Path) -> None:
    assert calibration_problem({"plan": {"rates": [10.0, 40.0]}}) is None
    said = calibration_problem({"plan": {"rates": [40.0]}})
    assert said is not None and "ran 40 r/s" in said
    assert calibration_problem({"plan": {"rates": [40.0, 40.0]}}) is not None  # one rate twice
    assert calibration_problem({}) is not None
    (tmp_path / "goodput.json").write_text(json.dumps({"plan": {"rates": [40]}}))
    with pytest.raises(UsageError, match="ladder of at least 2 rates"):
        check_calibration_sitting(tmp_path)
    with pytest.raises(UsageError, match="no "):
        check_calibration_sitting(tmp_path / "missing")


def test_the_host_scale_is_the_geometric_mean_over_common_rates() -> None:
    now = {10.0: 1.1, 40.0: 2.0, 80.0: 9.0}  # 80: not run in the calibration sitting
    then = {10.0: 1.0, 20.0: 5.0, 40.0: 1.0}
    assert host_scale(now, then) == pytest.approx(math.sqrt(1.1 * 2.0))
    assert host_scale(now, {20.0: 1.0}) is None
    assert host_scale({}, then) is None
    assert "x1.483" in describe(host_scale(now, then), [10.0, 40.0])
    assert "not rescaled" in describe(None, [])


def test_baseline_tpot_reads_the_baseline_rates_it_served() -> None:
    data = {
        "systems": [
            {"name": "slomesh", "steps": [{"rate_rps": 10, "served": 5, "tpot_p50_ms": 9.0}]},
            {
                "name": "bare-vllm",
                "steps": [
                    {"rate_rps": 10, "served": 5, "tpot_p50_ms": 1.5},
                    {"rate_rps": 20, "served": 0, "tpot_p50_ms": 0.0},  # nothing served
                ],
            },
        ]
    }
    assert baseline_tpot(data) == {10.0: 1.5}
    assert baseline_tpot({}) == {}


def test_a_scaled_line_takes_each_step_that_many_times_as_long() -> None:
    line = DecodeLine(0.001, 0.0002, 50, 0.00001)
    doubled = scaled_line(line, 2.0)
    assert doubled.step_s(8, 40) == pytest.approx(2 * line.step_s(8, 40))
    assert doubled.points == 50


def _ladder(rate: float, seconds: float, tpot_s: float, seed: int) -> list[Offered]:
    """Served requests of a host that decodes at `tpot_s` per token whatever the batch."""
    rng = random.Random(seed)
    t, out = 0.0, []
    while (t := t + rng.expovariate(rate)) < seconds:
        out.append(Offered(t, 32, 64, "served", 0.02, tpot_s))
    return out


def test_a_slower_host_simulates_less_goodput_at_capacity(tmp_path: Path) -> None:
    """Calibrated on a sitting at 4 ms per token, this sitting's ladder near that host's
    capacity: on a host twice as slow the same requests meet far less often."""
    reqs = _ladder(50.0, 10.0, 0.004, 1)
    result = {
        "start_times": [r.arrival_s for r in reqs],
        "input_lens": [r.input_tokens for r in reqs],
        "output_lens": [r.output_tokens for r in reqs],
        "ttfts": [r.ttft_s for r in reqs],
        "latencies": [r.ttft_s + 63 * r.tpot_s for r in reqs],
        "errors": [""] * len(reqs),
    }
    (tmp_path / result_name(50)).write_text(json.dumps(result))
    plan = {"rates": [50], "slo_ttft_ms": 1000, "slo_tpot_ms": 50, "output_len": 64}
    earlier = {20.0: _ladder(20.0, 10.0, 0.004, 2), 50.0: _ladder(50.0, 10.0, 0.004, 3)}
    profile = load_profiles(PROFILE)[0]

    def goodput(scale: float | None) -> float:
        got = analyse_system(
            1, plan, tmp_path, profile, 16, 2, calibrate_on=earlier, host_scale=scale
        )
        assert got is not None
        return float(got["rows"][0]["sim_goodput_rps"])

    same, slow = goodput(None), goodput(2.0)
    assert goodput(1.0) == pytest.approx(same)
    assert slow < 0.75 * same
