"""How the live host's speed moved over a ladder (each stream's TPOT over the fitted step), and
the simulated ladder on hosts drawn from it. Nothing is launched."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic import ValidationError

from services.ingress.core.delivered import DeliveredGuardConfig
from shared.profiles.io import load_profiles
from slomesh.bench.goodput.confusion import Offered
from slomesh.bench.goodput.delivered_fit import DecodeLine
from slomesh.bench.goodput.sim import simulate_rate
from slomesh.bench.goodput.speed_fit import (
    HostSpeedFit,
    describe,
    hosts,
    ladder_series,
    speed_series,
)
from slomesh.sim.host_speed import HostSpeed

PROFILE = (
    Path(__file__).resolve().parents[3] / "deploy" / "ray" / "profiles" / "cpu-tiny-llama.json"
)
LINE = DecodeLine(intercept_s=0.001, per_request_s=0.001, points=1)
"""A step of 2 ms alone, 3 ms with two streams."""


def stream(begin_s: float, tpot_s: float, out: int = 101) -> Offered:
    return Offered(begin_s, 32, out, "served", ttft_s=0.0, tpot_s=tpot_s)


@pytest.mark.parametrize(
    ("streams", "expected"),
    [
        # one stream at twice the step of a batch of one: 0.4 s over bins of 0.1 s
        ([stream(0.2, 0.004)], [None, None, 2.0, 2.0, 2.0, 2.0]),
        # as fast as the line: the host ran as fitted
        ([stream(0.0, 0.002)], [1.0, 1.0]),
        # two streams together (batch 2, step 3 ms), one at 1x and one at 2x: their mean
        ([stream(0.0, 0.003), stream(0.0, 0.006, out=51)], [1.5, 1.5, 1.5]),
    ],
)
def test_a_bin_reads_the_streams_running_in_it(
    streams: list[Offered], expected: list[float | None]
) -> None:
    got = speed_series(streams, LINE, 1, 0.0, 0.1)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g == e if e is None else g == pytest.approx(e, rel=0.05)


@pytest.mark.parametrize(
    ("weight", "expected"),
    [
        # the time-weighted mean of the ratios, 1x for 0.3 s and 2x for 0.3 s
        ("time", 1.5),
        # the time streamed over the line's time for the tokens streamed: 100 + 50 tokens at
        # 3 ms take 0.45 s on the line, 0.6 s live
        ("tokens", 0.6 / 0.45),
    ],
)
def test_a_bins_ratios_are_averaged_as_the_line_is_fitted(weight: str, expected: float) -> None:
    both = [stream(0.0, 0.003), stream(0.0, 0.006, out=51)]
    got = speed_series(both, LINE, 1, 0.0, 0.1, weight=weight)  # type: ignore[arg-type]
    assert got == pytest.approx([expected] * 3, rel=0.05)


def test_rejected_and_one_token_answers_leave_no_factor_and_rates_are_kept_apart() -> None:
    nothing = [Offered(0.0, 32, 256, "rejected"), Offered(0.1, 32, 1, "served", 0.01, 0.0)]
    assert speed_series(nothing, LINE, 1, 10.0, 0.1) == []
    both = ladder_series({10.0: [stream(0.0, 0.002)], 20.0: [stream(0.0, 0.004)]}, LINE, 1, 0.1)
    assert both[2] is None and both.count(None) == 2  # after each rate
    assert {round(f, 6) for f in both if f is not None} == {1.0, 2.0}


def test_the_fit_settings_are_checked_and_each_seed_draws_one_host() -> None:
    with pytest.raises(ValidationError, match="bin_s"):
        HostSpeedFit(bin_s=0)
    fit = HostSpeedFit(seeds=3)
    drawn = hosts([1.0, 2.0, None, 3.0], 5.0, fit)
    assert len(drawn) == 3 and all(len(h.factors) == 20 for h in drawn)
    assert "x1.00 (p10)" in describe([1.0, 2.0, None, 3.0], fit) and "3 seeds" in describe(
        [1.0], fit
    )
    assert "constant" in describe([None], fit)


def poisson(rate: float, seconds: float, out: int, seed: int = 0) -> list[Offered]:
    rng = random.Random(seed)
    t, reqs = 0.0, []
    while (t := t + rng.expovariate(rate)) <= seconds:
        reqs.append(Offered(t, 32, out, "served"))
    return reqs


def test_slow_spells_cost_the_guarded_ladder_goodput_a_constant_host_keeps() -> None:
    prof = replace(load_profiles(PROFILE)[0], submit_overhead_s=0.01)
    heavy = poisson(120.0, 8.0, out=256)
    args = (120.0, heavy, prof, 1, 16, 1.0, 0.05, DeliveredGuardConfig(), 2)
    steady = simulate_rate(*args)
    spells = HostSpeed(0.5, tuple([1.0, 1.0, 3.0, 3.0] * 40))
    spelled = simulate_rate(*args, speed=spells)
    assert steady.rejected > 0 and spelled.rejected > 0
    assert spelled.goodput_rps < steady.goodput_rps
    assert spelled.served - spelled.met > steady.served - steady.met  # let in, then missed


@pytest.mark.parametrize(
    ("submit_s", "ttft_slo_s", "met"),
    [(0.0, 0.3, 1), (0.5, 0.3, 0), (0.5, 0.6, 1)],
)
def test_a_request_reaches_its_engine_the_submit_overhead_after_it_arrives(
    submit_s: float, ttft_slo_s: float, met: int
) -> None:
    prof = replace(load_profiles(PROFILE)[0], submit_overhead_s=submit_s)
    alone = [Offered(0.0, 32, 16, "served")]
    got = simulate_rate(1.0, alone, prof, 1, 16, ttft_slo_s, 0.05, None)
    assert (got.served, got.met) == (1, met)
