"""Predicted remaining output of a request that has already generated some tokens.

A request back from a slice has outlived part of its predicted distribution. Its remaining
length is the conditional mean E[O − done | O > done] over the predicted buckets (each bucket
taken as uniform over (lo, hi]). When no predicted mass lies above `done` the request is in the
tail the predictor did not foresee; it is then assumed to run as long again (doubling), which
bounds the number of re-batchings logarithmically.
"""

from __future__ import annotations

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
