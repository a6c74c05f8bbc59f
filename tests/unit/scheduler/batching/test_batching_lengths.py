"""remaining_tokens: the predicted output still to come after `done` tokens (conditional mean)."""

from __future__ import annotations

import itertools

import pytest

from services.scheduler.core.batching.remaining_lengths import remaining_tokens
from shared.domain.length_distribution import LengthDistribution


def dist(
    upper: tuple[int, ...], probs: tuple[float, ...], mean: float | None = None
) -> LengthDistribution:
    """A distribution over buckets (lo, hi]; mean defaults to the bucket midpoints' mean."""
    lows = (0, *upper[:-1])
    if mean is None:
        mean = sum(p * (lo + hi) / 2 for lo, hi, p in zip(lows, upper, probs, strict=True))
    return LengthDistribution(mean, mean, mean, upper, probs, "test")


TWO = dist((10, 20), (0.5, 0.5))  # uniform over (0, 20]
SKEWED = dist((10, 20, 40), (0.25, 0.75, 0.0), mean=12.0)  # nothing above 20


@pytest.mark.parametrize(
    ("d", "done", "expected"),
    [
        # nothing generated yet: the distribution's mean, at least 1
        (TWO, 0, 10.0),
        (SKEWED, 0, 12.0),
        (dist((10,), (1.0,), mean=0.4), 0, 1.0),
        (TWO, -3, 10.0),
        # inside the buckets: E[O - done | O > done], each bucket uniform over (lo, hi]
        (TWO, 5, 7.5),  # uniform over (5, 20]: mean remaining (20 - 5) / 2
        (TWO, 10, 5.0),  # the first bucket is used up
        (TWO, 15, 2.5),
        (SKEWED, 5, (0.125 * 2.5 + 0.75 * 10.0) / 0.875),
        (SKEWED, 16, 2.0),  # only (16, 20] of the middle bucket is left
        (TWO, 19, 1.0),  # half a token expected: at least 1
        # beyond all predicted mass: assume it runs as long again (doubling)
        (TWO, 20, 20.0),
        (TWO, 57, 57.0),
        (SKEWED, 20, 20.0),  # the zero-probability bucket (20, 40] does not count
        (SKEWED, 33, 33.0),
    ],
)
def test_remaining_tokens(d, done, expected):
    assert remaining_tokens(d, done) == pytest.approx(expected)


@pytest.mark.parametrize("d", [TWO, SKEWED, dist((16, 32, 64), (0.2, 0.3, 0.5))])
def test_remaining_tokens_is_at_least_one_and_total_grows_with_done(d):
    totals = []
    for done in range(0, 80):
        left = remaining_tokens(d, done)
        assert left >= 1.0
        totals.append(done + left)  # expected total length given it has reached `done`
    assert all(b >= a - 1e-9 for a, b in itertools.pairwise(totals))
