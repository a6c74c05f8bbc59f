"""bench-agree's host speed: each window's factor is the time its streams ran over the time the
decode plane gives the tokens they streamed there; the simulated replicas run at that speed; a
run simulated at a known speed gives that speed back; the profile is fitted on the measured
trace, not on the calibration trace that ran before it."""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from shared.domain import HardwareProfile
from shared.domain.engine import EngineConfig
from shared.domain.profile import DecodeCoeffs
from shared.metrics.records import RequestRecord
from shared.profiles.io import load_profiles
from slomesh.bench.agree.calibrate import decode_line
from slomesh.bench.agree.host_speed import calibrated_on_trace, measured_speed
from slomesh.bench.agree.sim import simulate
from slomesh.bench.agree.workload import (
    AgreeRequest,
    AgreeWorkloadSpec,
    generate_agree_workload,
    parse_classes,
)
from slomesh.bench.goodput.delivered_fit import DecodeLine
from slomesh.sim.host_speed import HostSpeed
from slomesh.stacks import STACKS

PROFILE = Path(__file__).resolve().parents[3] / "deploy/ray/profiles/cpu-tiny-llama.json"
ENGINE = EngineConfig(max_num_seqs=2, max_num_batched_tokens=8192)
ONE_MS = DecodeLine(intercept_s=0.001, per_request_s=0.0, points=1)


def _stream(rid: str, first_s: float, finish_s: float, tokens: int) -> RequestRecord:
    return RequestRecord(
        request_id=rid,
        model="m",
        class_name="c",
        tenant="t",
        instance="i0",
        arrival_s=first_s,
        input_tokens=16,
        output_tokens=tokens,
        first_token_s=first_s,
        finish_s=finish_s,
        ttft_deadline_s=10.0,
        tpot_target_s=None,
        e2e_deadline_s=None,
    )


@pytest.mark.parametrize(
    ("streams", "factors"),
    [
        # one stream per window at the plane's 1 ms per token: the plane's speed
        ([("a", 0.0, 1.0, 1001), ("b", 1.0, 2.0, 1001)], (1.0, 1.0)),
        # 2 ms per token in window 2; nothing streamed in window 1 keeps 1
        ([("a", 0.0, 1.0, 1001), ("b", 2.0, 3.0, 501)], (1.0, 1.0, 2.0)),
        # a stream across two windows counts in both, for the time it streamed in each
        ([("a", 0.0, 1.0, 1001), ("b", 1.5, 2.5, 251)], (1.0, 4.0, 4.0)),
        # two streams in one window: the time they streamed (1.5 s) over the plane's time for
        # their 1,000 + 250 tokens (1.25 s)
        ([("a", 0.0, 1.0, 1001), ("b", 0.0, 0.5, 251)], (1.5 / 1.25,)),
    ],
)
def test_each_window_is_its_streamed_time_over_the_planes(
    streams: list[tuple[str, float, float, int]], factors: tuple[float, ...]
) -> None:
    records = [_stream(*s) for s in streams]
    speed = measured_speed(records, ONE_MS, 1, 0.0, 1.0, start_s=0.0)
    assert speed.bin_s == 1.0 and speed.factors == pytest.approx(factors)
    # the trace's first arrival at 2 s on the simulator's clock: the same factors from there
    later = measured_speed(records, ONE_MS, 1, 0.0, 1.0, start_s=2.0)
    assert later.factors == pytest.approx((1.0, 1.0, *factors))


def test_rejected_and_one_token_requests_say_nothing_of_the_speed() -> None:
    one = _stream("one", 0.0, 0.0, 1)
    rejected = replace(_stream("no", 0.0, 1.0, 100), rejected=True, reject_reason="HTTP 429")
    assert measured_speed([one, rejected], ONE_MS, 1, 0.0, 1.0, 0.0).factors == ()
    assert measured_speed([], ONE_MS, 1, 0.0, 1.0, 0.0).factors == ()
    with pytest.raises(ValueError, match="window_s"):
        measured_speed([one], ONE_MS, 1, 0.0, 0.0, 0.0)


def _trace(requests: int, rate: float, seed: int) -> list[AgreeRequest]:
    spec = AgreeWorkloadSpec(
        classes=parse_classes("long:1:3600:128:64-256"), requests=requests, rate_rps=rate
    )
    return list(generate_agree_workload(spec, seed))


def _run(
    profile: HardwareProfile, trace: list[AgreeRequest], speed: HostSpeed | None = None
) -> list[RequestRecord]:
    reqs = [r.to_request(profile.model) for r in trace]
    return simulate(profile, 2, ENGINE, STACKS.create("edf"), reqs, host_speed=speed).records


def test_the_simulated_replicas_run_at_the_hosts_speed() -> None:
    """A factor of 1 everywhere changes nothing; 3 everywhere makes every stream's time per
    token 3 times as long."""
    profile = load_profiles(PROFILE)[0]
    trace = _trace(12, 0.2, 0)
    bare = _run(profile, trace)
    assert _run(profile, trace, HostSpeed(1.0, (1.0,) * 100)) == bare
    slow = _run(profile, trace, HostSpeed(1.0, (3.0,) * 100))
    ratios = [s.tpot_s / b.tpot_s for s, b in zip(slow, bare, strict=True) if s.tpot_s and b.tpot_s]
    assert ratios and ratios == pytest.approx([3.0] * len(ratios), rel=0.02)


def test_a_run_at_a_known_speed_gives_that_speed_back() -> None:
    """Simulated with the host twice as slow from 10 s to 20 s: the speed measured on its
    records is about 2 there and about 1 after."""
    profile = load_profiles(PROFILE)[0]
    trace = _trace(120, 3.0, 1)
    stall = HostSpeed(1.0, (1.0,) * 10 + (2.0,) * 10)
    records = _run(profile, trace, stall)
    line = decode_line({3.0: records}, 2, 3.0)
    assert line is not None
    got = measured_speed(records, line, 2, 3.0, 1.0, 0.0).factors
    assert statistics.median(got[11:19]) == pytest.approx(2.0, rel=0.25)
    assert statistics.median(got[24:36]) == pytest.approx(1.0, rel=0.2)
    assert statistics.median(got[11:19]) > 1.6 * statistics.median(got[24:36])


def _slower(profile: HardwareProfile, x: float) -> HardwareProfile:
    d = profile.decode
    return replace(profile, decode=DecodeCoeffs(d.d1 * x, d.d2 * x, d.d3 * x, d.d4 * x))


def test_the_profile_is_fitted_on_the_measured_trace_not_the_calibration() -> None:
    """The calibration trace ran at the profile's speed, the measured trace 1.5 times slower:
    the simulated step is the trace's, the source names both, and the trace's speed against
    its own plane is about 1; a window of 0 measures no speed."""
    profile = load_profiles(PROFILE)[0]
    cal = {3.0: _run(profile, _trace(80, 3.0, 2))}
    measured = _run(_slower(profile, 1.5), _trace(120, 3.0, 3))
    prof, speed = calibrated_on_trace(profile, cal, measured, 2, 2, 3.0, 1.0, 0.0)
    ratio = [prof.decode_time_s(200, n) / profile.decode_time_s(200, n) for n in (1, 2)]
    assert ratio == pytest.approx([1.5, 1.5], rel=0.15)
    assert "fitted on the measured trace" in prof.source
    assert "the calibration traces'" in prof.source
    assert speed is not None and statistics.median(speed.factors) == pytest.approx(1.0, rel=0.1)
    assert calibrated_on_trace(profile, cal, measured, 2, 2, 3.0, 0.0, 0.0)[1] is None
