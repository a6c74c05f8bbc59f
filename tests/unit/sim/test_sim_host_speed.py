"""A host whose speed varies: the factor series, its seeded block draw, and the lone engine's
steps scaled by it."""

from __future__ import annotations

import pytest

from shared.domain import SLO, Request
from shared.domain.engine import EngineConfig
from slomesh.sim.host_speed import HostSpeed, resample
from slomesh.sim.lone_engine import LoneEngine
from tests.unit.sim.test_sim_lone_engine import PROFILE  # the same one-engine profile


def request(rid: str, arrival: float, output: int) -> Request:
    return Request(rid, "m", 20, output, arrival, SLO(10.0), true_output_tokens=output)


@pytest.mark.parametrize(
    ("t_s", "factor"),
    [
        (-1.0, 1.0),  # before the series: as profiled
        (0.0, 2.0),
        (0.49, 2.0),
        (0.5, 0.5),
        (1.2, 3.0),
        (1.5, 1.0),  # after it
        (100.0, 1.0),
    ],
)
def test_the_factor_of_a_step_is_that_of_the_bin_it_starts_in(t_s: float, factor: float) -> None:
    assert HostSpeed(0.5, (2.0, 0.5, 3.0)).factor_at(t_s) == factor


@pytest.mark.parametrize(
    ("bin_s", "factors", "match"),
    [(0.0, (1.0,), "bin_s"), (0.5, (1.0, 0.0), "factor"), (0.5, (-1.0,), "factor")],
)
def test_a_host_refuses_bins_and_factors_that_are_not_positive(
    bin_s: float, factors: tuple[float, ...], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        HostSpeed(bin_s, factors)


MEASURED: list[float | None] = [1.0, 1.1, 1.2, 1.3, None, 2.0, 2.1, 2.2, 2.3, 2.4, None, 9.0]


def test_a_draw_takes_whole_blocks_of_the_measured_series_and_never_spans_a_gap() -> None:
    measured: list[float | None] = [1.0, 1.1, 1.2, 1.3, None, 2.0, 2.1, 2.2]
    pairs = {(1.0, 1.1), (1.1, 1.2), (1.2, 1.3), (2.0, 2.1), (2.1, 2.2)}
    host = resample(measured, 0.25, 0.5, 30.0, seed=3)
    assert len(host.factors) == 120 and host.bin_s == 0.25
    drawn = {host.factors[i : i + 2] for i in range(0, 120, 2)}
    assert drawn <= pairs and len(drawn) > 1  # (1.3, 2.0) would span the gap


def test_a_seed_gives_one_host_and_the_draw_keeps_the_measured_spread() -> None:
    a = resample(MEASURED, 0.25, 1.0, 500.0, seed=0)
    assert a == resample(MEASURED, 0.25, 1.0, 500.0, seed=0)
    assert a != resample(MEASURED, 0.25, 1.0, 500.0, seed=1)
    assert min(a.factors) == 1.0 and max(a.factors) == 9.0
    assert 1.2 < a.mean() < 3.0


def test_nothing_measured_draws_a_constant_host() -> None:
    host = resample([None, None], 0.25, 1.0, 10.0, seed=0)
    assert host.factors == () and host.factor_at(3.0) == 1.0 and host.mean() == 1.0
    with pytest.raises(ValueError, match="block_s"):
        resample(MEASURED, 0.25, 0.0, 10.0, seed=0)


def _finish_times(speed: HostSpeed | None) -> tuple[list[float], float]:
    engine = LoneEngine("t", PROFILE, EngineConfig(), speed)
    seqs = engine.run([request("a", 0.0, output=8), request("b", 0.0, output=8)])
    return [s.finish_s or 0.0 for s in seqs], engine.core.busy_s


def test_a_host_twice_as_slow_doubles_every_step_and_the_busy_time() -> None:
    (fa, fb), busy = _finish_times(None)
    (sa, sb), slow_busy = _finish_times(HostSpeed(100.0, (2.0,)))
    assert sa == pytest.approx(2 * fa) and sb == pytest.approx(2 * fb)
    assert slow_busy == pytest.approx(2 * busy)


def test_a_slow_spell_delays_only_the_steps_that_start_in_it() -> None:
    (fa, _), _ = _finish_times(None)
    spell_after_the_end = HostSpeed(fa, (1.0, 5.0))
    assert _finish_times(spell_after_the_end)[0][0] == pytest.approx(fa)
    # the work left at fa/2 runs 5x slower until the clock leaves the spell (at fa)
    assert fa * 1.2 < _finish_times(HostSpeed(fa / 2, (1.0, 5.0)))[0][0] < fa * 3
