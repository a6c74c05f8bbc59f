"""Bucketed output-length distributions: the predictor's answer and the maths that builds it.

A histogram over fixed buckets (lower, upper] of output tokens (the first bucket starts at 0) has,
per bucket, a probability and a *centre*: the mean output length of what fell into it. Within a
bucket the length is modelled as two uniform halves split at the centre (half the bucket's mass on
(lower, centre], half on (centre, upper]), so quantiles move with where the lengths actually fall
instead of sticking to the bucket's midpoint. The mean uses the centres directly.

Capping by max_tokens: generation stops at max_tokens, so the predicted length is min(O,
max_tokens). All mass above max_tokens becomes a point mass at max_tokens, kept in the bucket that
contains max_tokens; the part of that bucket below max_tokens keeps its (truncated) shape. Mean and
quantiles of the capped distribution therefore never exceed max_tokens.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
from numpy.typing import NDArray

DEFAULT_BUCKET_UPPER_TOKENS: tuple[int, ...] = tuple(16 * 2**i for i in range(10))
"""Log-spaced inclusive bucket upper bounds: 16, 32, 64, ..., 4096, 8192 tokens."""

_PROB_TOLERANCE = 1e-6


@dataclass(frozen=True, slots=True)
class LengthDistribution:
    """A predicted output-length distribution (maps 1:1 onto the LengthPrediction message).

    mean_tokens, p50_tokens, p90_tokens: expected, median and 90th-percentile output tokens.
    bucket_upper_tokens: inclusive upper bounds of the buckets, ascending (the first starts at 0).
    bucket_probs: probability of each bucket; sums to 1.
    version: the predictor (and its state) that made the prediction.
    """

    mean_tokens: float
    p50_tokens: float
    p90_tokens: float
    bucket_upper_tokens: tuple[int, ...]
    bucket_probs: tuple[float, ...]
    version: str

    def __post_init__(self) -> None:
        check_bucket_bounds(self.bucket_upper_tokens)
        if len(self.bucket_probs) != len(self.bucket_upper_tokens):
            raise ValueError(
                f"length_distribution.bucket_probs has {len(self.bucket_probs)} entries for "
                f"{len(self.bucket_upper_tokens)} buckets"
            )
        if any(not (math.isfinite(p) and p >= 0) for p in self.bucket_probs):
            raise ValueError("length_distribution.bucket_probs must be finite and >= 0")
        total = math.fsum(self.bucket_probs)
        if abs(total - 1.0) > _PROB_TOLERANCE:
            raise ValueError(f"length_distribution.bucket_probs must sum to 1, got {total}")
        for name in ("mean_tokens", "p50_tokens", "p90_tokens"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"length_distribution.{name} must be finite and >= 0, got {value}")
        if self.p50_tokens > self.p90_tokens + 1e-9:
            raise ValueError("length_distribution.p50_tokens must not exceed p90_tokens")

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form, field names as in the LengthPrediction message."""
        return {
            "mean_tokens": self.mean_tokens,
            "p50_tokens": self.p50_tokens,
            "p90_tokens": self.p90_tokens,
            "bucket_upper_tokens": list(self.bucket_upper_tokens),
            "bucket_probs": list(self.bucket_probs),
            "predictor_version": self.version,
        }


def check_bucket_bounds(upper: Sequence[int]) -> None:
    """Bucket upper bounds must be non-empty ints >= 1, strictly ascending."""
    if len(upper) == 0:
        raise ValueError("bucket_upper_tokens must not be empty")
    for b in upper:
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise ValueError(f"bucket_upper_tokens must be ints >= 1, got {b!r}")
    if any(a >= b for a, b in pairwise(upper)):
        raise ValueError(f"bucket_upper_tokens must be strictly ascending, got {list(upper)}")


def bucket_lowers(upper: Sequence[int]) -> NDArray[np.float64]:
    """Exclusive lower bound of each bucket: 0 for the first, the previous upper bound after."""
    return np.asarray([0, *upper[:-1]], dtype=np.float64)


def bucket_midpoints(upper: Sequence[int]) -> NDArray[np.float64]:
    """Midpoint of each bucket, the centre used where nothing has been observed."""
    return (bucket_lowers(upper) + np.asarray(upper, dtype=np.float64)) / 2.0


def bucket_index(upper: Sequence[int], tokens: float) -> int:
    """Index of the bucket holding `tokens`; lengths above the last bound go to the last bucket."""
    for i, b in enumerate(upper):
        if tokens <= b:
            return i
    return len(upper) - 1


def _shape_cdf(lo: float, centre: float, hi: float, x: float) -> float:
    """CDF within one bucket of the two-halves shape at x in [lo, hi]."""
    if x <= lo:
        return 0.0
    if x >= hi:
        return 1.0
    if x <= centre:
        return 0.5 * (x - lo) / (centre - lo)
    return 0.5 + 0.5 * (x - centre) / (hi - centre)


def _shape_inverse(lo: float, centre: float, hi: float, u: float) -> float:
    """Inverse of _shape_cdf for u in [0, 1]."""
    if u <= 0.5:
        return lo + (centre - lo) * 2.0 * u
    return centre + (hi - centre) * (2.0 * u - 1.0)


def _shape_partial_mean(lo: float, centre: float, hi: float, x: float) -> float:
    """Mean of the shape restricted to (lo, x] for lo < x < hi."""
    if x <= centre:
        return (lo + x) / 2.0
    upper_mass = 0.5 * (x - centre) / (hi - centre)
    total = 0.5 + upper_mass
    return (0.5 * (lo + centre) / 2.0 + upper_mass * (centre + x) / 2.0) / total


def summarize(
    upper: Sequence[int],
    weights: NDArray[np.float64],
    centres: NDArray[np.float64],
    max_tokens: int | None,
    version: str,
) -> LengthDistribution:
    """The (capped) LengthDistribution of a histogram with per-bucket weights and centres.

    weights need not be normalised but must be >= 0 with a positive sum; centres are clipped into
    their buckets. max_tokens None (or at least the last bound) leaves the histogram uncapped.
    """
    total = float(weights.sum())
    if not (math.isfinite(total) and total > 0) or bool((weights < 0).any()):
        raise ValueError("histogram weights must be >= 0 with a positive, finite sum")
    probs = weights / total
    lows = bucket_lowers(upper)
    highs = np.asarray(upper, dtype=np.float64)
    span = highs - lows
    c = np.clip(centres, lows + 1e-6 * span, highs)
    n = len(upper)
    # Per bucket: continuous mass (with the fraction of its shape kept) and a point mass at the cap.
    cont = probs.copy()
    kept = np.ones(n)
    cap_k = n
    cap = float(highs[-1])
    point = 0.0
    if max_tokens is not None and max_tokens < highs[-1]:
        cap = float(max_tokens)
        cap_k = bucket_index(upper, cap)
        lo, hi, ck = float(lows[cap_k]), float(highs[cap_k]), float(c[cap_k])
        frac = _shape_cdf(lo, ck, hi, cap)
        point = float(probs[cap_k + 1 :].sum()) + float(probs[cap_k]) * (1.0 - frac)
        cont[cap_k + 1 :] = 0.0
        cont[cap_k] = probs[cap_k] * frac
        kept[cap_k] = frac
    means = c.copy()
    if cap_k < n and kept[cap_k] < 1.0:
        lo, hi, ck = float(lows[cap_k]), float(highs[cap_k]), float(c[cap_k])
        means[cap_k] = _shape_partial_mean(lo, ck, hi, cap) if kept[cap_k] > 0 else cap
    mean = float(cont @ means) + point * cap

    def quantile(q: float) -> float:
        acc = 0.0
        for i in range(n):
            m = float(cont[i])
            if m > 0 and acc + m >= q:
                u = (q - acc) / m * float(kept[i])
                return _shape_inverse(float(lows[i]), float(c[i]), float(highs[i]), u)
            acc += m
            if i == cap_k:
                return cap  # the rest is the point mass at max_tokens
        return float(highs[-1])

    out = np.zeros(n)
    out[:] = cont
    if cap_k < n:
        out[cap_k] += point
    out = out / out.sum()
    return LengthDistribution(
        mean_tokens=min(mean, cap),
        p50_tokens=min(quantile(0.5), cap),
        p90_tokens=min(quantile(0.9), cap),
        bucket_upper_tokens=tuple(int(b) for b in upper),
        bucket_probs=tuple(float(p) for p in out),
        version=version,
    )
