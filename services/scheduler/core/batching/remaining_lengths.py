"""Predicted remaining output of a request that has already generated some tokens.

A request back from a slice has outlived part of its predicted distribution. Its remaining
length is the conditional mean E[O − done | O > done] over the predicted buckets (each bucket
taken as uniform over (lo, hi]). When no predicted mass lies above `done` the request is in the
tail the predictor did not foresee; it is then assumed to run as long again (doubling), which
bounds the number of re-batchings logarithmically.
"""

from __future__ import annotations

from shared.domain import Request
from shared.domain.length_distribution import LengthDistribution, bucket_lowers


def remaining_tokens(dist: LengthDistribution, done: int) -> float:
    """Expected output tokens still to come after `done` were generated (>= 1)."""
    if done <= 0:
        return max(1.0, dist.mean_tokens)
    lows = bucket_lowers(dist.bucket_upper_tokens)
    mass = total = 0.0
    for lo, hi, p in zip(lows, dist.bucket_upper_tokens, dist.bucket_probs, strict=True):
        if hi <= done or p <= 0:
            continue
        start = max(float(lo), float(done))
        share = p * (hi - start) / (hi - lo)  # the bucket's mass above `done`
        mass += share
        total += share * ((start + hi) / 2.0 - done)
    if mass <= 0:
        return float(max(1, done))
    return max(1.0, total / mass)


def hinted_remaining_tokens(request: Request, done: int) -> float:
    """Expected output tokens still to come from the request's length hint (the live mesh's
    prediction; a uniform prior on [0, max_tokens], mean max/2, without one): mean − done while
    the mean is ahead, else doubling as above (>= 1)."""
    hint = request.length_hint
    mean = hint.mean_tokens if hint is not None else request.max_tokens / 2.0
    if done < mean:
        return max(1.0, mean - done)
    return float(max(1, done))
