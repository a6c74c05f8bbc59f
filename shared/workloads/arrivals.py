"""Arrival processes: absolute arrival times in seconds, non-decreasing, all strictly after 0.

Every process is a cumulative sum of inter-arrival gaps whose mean is 1 / rate_rps:

- `poisson_arrivals`: exponential gaps (coefficient of variation 1).
- `gamma_arrivals`: Gamma gaps with a chosen coefficient of variation (cv < 1 smoother than Poisson,
  cv = 1 Poisson in distribution, cv > 1 bursty).
- `trace_arrivals`: a real trace's gaps, time-scaled to the target rate and looped when needed.

Randomness only ever comes from the `numpy.random.Generator` passed in.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray


def _check_rate(rate_rps: float) -> None:
    if not (math.isfinite(rate_rps) and rate_rps > 0):
        raise ValueError(f"rate_rps must be > 0 and finite, got {rate_rps}")


def _check_n(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int | np.integer):
        raise ValueError(f"n must be an integer >= 0, got {n!r}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")


def poisson_arrivals(rate_rps: float, n: int, rng: np.random.Generator) -> NDArray[np.float64]:
    """n arrival times of a Poisson process of rate `rate_rps` (exponential gaps, first after 0)."""
    _check_rate(rate_rps)
    _check_n(n)
    gaps = rng.exponential(scale=1.0 / rate_rps, size=int(n))
    return np.cumsum(gaps, dtype=np.float64)


def gamma_arrivals(
    rate_rps: float, cv: float, n: int, rng: np.random.Generator
) -> NDArray[np.float64]:
    """n arrival times with Gamma gaps of mean 1/rate_rps and coefficient of variation `cv`.

    Gamma(shape k, scale θ) has mean kθ and CV 1/√k, so k = 1/cv² and θ = 1/(rate_rps·k).
    """
    _check_rate(rate_rps)
    if not (math.isfinite(cv) and cv > 0):
        raise ValueError(f"cv must be > 0 and finite, got {cv}")
    _check_n(n)
    shape = 1.0 / (cv * cv)
    scale = 1.0 / (rate_rps * shape)
    gaps = rng.gamma(shape=shape, scale=scale, size=int(n))
    return np.cumsum(gaps, dtype=np.float64)


def trace_arrivals(
    trace_offsets_s: ArrayLike, rate_rps: float, n: int, start_index: int = 0
) -> NDArray[np.float64]:
    """Replay a trace's arrival times, time-scaled so the mean rate is exactly `rate_rps`.

    With m trace rows spanning D seconds, times are multiplied by s = (m - 1) / (rate_rps · D), so
    the trace's mean gap becomes 1/rate_rps and the relative gaps (shape, CV, bursts) are kept.
    When more than the remaining rows are needed the trace loops; each loop is shifted by the scaled
    duration plus one mean gap, so the looped process has period m / rate_rps and rate exactly
    rate_rps. The replay starts at row `start_index` (0 = the trace's first request) and its first
    arrival is one mean gap after 0, like the other processes; hence arrival k (1-based) of a replay
    that covers whole loops lands at exactly k / rate_rps.
    """
    _check_rate(rate_rps)
    _check_n(n)
    offsets = np.asarray(trace_offsets_s, dtype=np.float64)
    if offsets.ndim != 1 or offsets.shape[0] < 2:
        raise ValueError(f"trace_offsets_s must be 1-D with at least 2 times, got {offsets.shape}")
    if np.any(np.diff(offsets) < 0):
        raise ValueError("trace_offsets_s must be sorted (non-decreasing)")
    m = int(offsets.shape[0])
    duration = float(offsets[-1] - offsets[0])
    if not duration > 0:
        raise ValueError("trace_offsets_s must span a positive duration")
    if not 0 <= start_index < m:
        raise ValueError(f"start_index must be in [0, {m}), got {start_index}")
    mean_gap = 1.0 / rate_rps
    scaled = (offsets - offsets[0]) * ((m - 1) / (rate_rps * duration))
    period = m * mean_gap
    idx = np.arange(start_index, start_index + int(n), dtype=np.int64)
    loop, row = np.divmod(idx, m)
    times = loop.astype(np.float64) * period + scaled[row]
    return np.asarray(times - scaled[start_index] + mean_gap, dtype=np.float64)
