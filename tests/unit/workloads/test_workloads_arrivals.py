"""Arrival processes: rates, burstiness, trace replay and validation."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from numpy.typing import NDArray

from shared.workloads.arrivals import gamma_arrivals, poisson_arrivals, trace_arrivals
from shared.workloads.traces import load_azure_trace

N = 20_000


def gaps_of(times: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.diff(times, prepend=0.0)


def cv_of(x: NDArray[np.float64]) -> float:
    return float(x.std() / x.mean())


@pytest.mark.parametrize("rate_rps", [0.5, 4.0, 100.0])
def test_poisson_mean_gap_and_cv(rate_rps: float) -> None:
    times = poisson_arrivals(rate_rps, N, np.random.default_rng(1))
    gaps = gaps_of(times)
    assert times.shape == (N,)
    assert times[0] > 0
    assert np.all(gaps > 0)
    assert gaps.mean() == pytest.approx(1.0 / rate_rps, rel=0.03)
    assert cv_of(gaps) == pytest.approx(1.0, rel=0.05)


@pytest.mark.parametrize("cv", [0.5, 1.0, 3.0])
def test_gamma_mean_gap_and_cv(cv: float) -> None:
    rate_rps = 8.0
    gaps = gaps_of(gamma_arrivals(rate_rps, cv, N, np.random.default_rng(2)))
    assert gaps.mean() == pytest.approx(1.0 / rate_rps, rel=0.05)
    assert cv_of(gaps) == pytest.approx(cv, rel=0.05)


def test_same_generator_state_same_arrivals_and_different_seed_differs() -> None:
    a = gamma_arrivals(3.0, 2.0, 100, np.random.default_rng(7))
    b = gamma_arrivals(3.0, 2.0, 100, np.random.default_rng(7))
    c = gamma_arrivals(3.0, 2.0, 100, np.random.default_rng(8))
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("name", ["conv", "code"])
@pytest.mark.parametrize("rate_rps", [1.0, 25.0])
def test_trace_replay_mean_rate_and_gap_shape(name: str, rate_rps: float) -> None:
    offsets = load_azure_trace(name).offsets_s  # type: ignore[arg-type]
    m = len(offsets)
    times = trace_arrivals(offsets, rate_rps, m)
    assert times[0] == pytest.approx(1.0 / rate_rps)
    assert m / times[-1] == pytest.approx(rate_rps, rel=1e-9)
    scaled_gaps = np.diff(times)
    trace_gaps = np.diff(offsets)
    assert scaled_gaps.mean() == pytest.approx(1.0 / rate_rps, rel=1e-9)
    assert cv_of(scaled_gaps) == pytest.approx(cv_of(trace_gaps), rel=1e-9)
    # every gap is the trace gap times one constant factor
    ratio = scaled_gaps[trace_gaps > 0] / trace_gaps[trace_gaps > 0]
    assert np.allclose(ratio, ratio[0], rtol=1e-6)


def test_trace_replay_loops_with_one_mean_gap_between_loops() -> None:
    offsets = np.array([0.0, 1.0, 4.0])  # m = 3, D = 4
    rate_rps = 2.0  # mean gap 0.5; scale (m - 1) / (rate * D) = 0.25
    times = trace_arrivals(offsets, rate_rps, 7)
    expected = [0.5, 0.75, 1.5, 2.0, 2.25, 3.0, 3.5]
    assert times.tolist() == pytest.approx(expected)
    assert 6 / times[5] == pytest.approx(rate_rps)  # whole loops keep the rate exactly


def test_trace_replay_from_a_start_row_rotates_the_trace() -> None:
    offsets = np.array([0.0, 1.0, 4.0])
    times = trace_arrivals(offsets, 2.0, 4, start_index=2)
    # rows 2, 0, 1, 2 -> gaps: first mean gap, loop gap 0.5, 0.25, 0.75
    assert times.tolist() == pytest.approx([0.5, 1.0, 1.25, 2.0])


@pytest.mark.parametrize(
    "make",
    [
        lambda: poisson_arrivals(1.0, 0, np.random.default_rng(0)),
        lambda: gamma_arrivals(1.0, 2.0, 0, np.random.default_rng(0)),
        lambda: trace_arrivals([0.0, 1.0], 1.0, 0),
    ],
)
def test_zero_requests_gives_empty(make: Callable[[], NDArray[np.float64]]) -> None:
    assert make().shape == (0,)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: poisson_arrivals(-1.0, 5, np.random.default_rng(0)), "rate_rps must be > 0"),
        (lambda: poisson_arrivals(0.0, 5, np.random.default_rng(0)), "rate_rps must be > 0"),
        (lambda: poisson_arrivals(1.0, -1, np.random.default_rng(0)), "n must be >= 0"),
        (lambda: gamma_arrivals(1.0, 0.0, 5, np.random.default_rng(0)), "cv must be > 0"),
        (lambda: gamma_arrivals(float("inf"), 1.0, 5, np.random.default_rng(0)), "rate_rps"),
        (lambda: trace_arrivals([0.0, 1.0], -2.0, 5), "rate_rps must be > 0"),
        (lambda: trace_arrivals([0.0, 1.0], 1.0, -5), "n must be >= 0"),
        (lambda: trace_arrivals([0.0], 1.0, 5), "at least 2"),
        (lambda: trace_arrivals([1.0, 0.0], 1.0, 5), "sorted"),
        (lambda: trace_arrivals([0.0, 1.0], 1.0, 5, start_index=2), "start_index"),
    ],
)
def test_invalid_arguments_name_the_field(call: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()
