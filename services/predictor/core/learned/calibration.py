"""Calibrating the learned predictor's spread: a temperature on the threshold logits.

The ordinal model's bucket probabilities come from sigmoid(logit / T). `fit_temperature` picks T
on out-of-sample predictions: the grid value whose p90 covers a share of the true lengths nearest
the middle of a band around 0.9 (ties: the least log loss of the true bucket). The least log loss
inside the band (the rule before) sat at the band's top edge and, since the cross-validation
fold models are weaker than the final one, over-covered the held-out split with hints whose
std overstated the error (docs/results/design.md). Coverage is computed without
building distributions: y <= p90 exactly when the CDF at y (`cdf_at`, the within-bucket shape of
distribution.summarize) is at most 0.9.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from services.predictor.core.learned.ordinal import OrdinalSGD

TEMPERATURES = np.exp(np.linspace(math.log(0.5), math.log(4.0), 61))
"""The temperature grid: 61 log-spaced values from 0.5 to 4."""


def cdf_at(
    upper: Sequence[int],
    probs: NDArray[np.float64],
    centres: NDArray[np.float64],
    tokens: NDArray[np.float64],
) -> NDArray[np.float64]:
    """P(length <= tokens[i]) under row i of `probs`, with the within-bucket shape of
    distribution.summarize (two uniform halves split at the bucket's centre), uncapped."""
    highs = np.asarray(upper, dtype=np.float64)
    lows = np.concatenate([[0.0], highs[:-1]])
    c = np.clip(centres, lows + 1e-6 * (highs - lows), highs)
    k = np.minimum(np.searchsorted(highs, tokens, side="left"), len(highs) - 1)
    below = np.concatenate([np.zeros((len(probs), 1)), np.cumsum(probs, axis=1)], axis=1)
    rows = np.arange(len(probs))
    lo, ck, hi = lows[k], c[k], highs[k]
    x = np.clip(tokens, lo, hi)
    within = np.where(
        x <= ck, 0.5 * (x - lo) / (ck - lo), 0.5 + 0.5 * (x - ck) / np.maximum(hi - ck, 1e-12)
    )
    out: NDArray[np.float64] = below[rows, k] + probs[rows, k] * np.clip(within, 0.0, 1.0)
    return out


def fit_temperature(
    logits: NDArray[np.float64],
    tokens: NDArray[np.int64],
    ordinal: OrdinalSGD,
    upper: Sequence[int],
    centres: NDArray[np.float64],
    p90_band: tuple[float, float],
) -> float:
    """The grid temperature whose p90 covers a share of `tokens` nearest the middle of
    `p90_band` (ties, to 1e-9: the least mean log loss of the true buckets)."""
    buckets = np.minimum(np.searchsorted(np.asarray(upper), tokens, side="left"), len(upper) - 1)
    y = tokens.astype(np.float64)
    rows = np.arange(len(buckets))
    middle = (p90_band[0] + p90_band[1]) / 2.0
    best = (math.inf, math.inf, 1.0)  # (|coverage - middle|, log loss, T)
    for t in TEMPERATURES:
        p = ordinal.probs_from_logits(logits, float(t))
        loss = float(-np.mean(np.log(p[rows, buckets])))
        # y <= p90 exactly when the CDF at y is at most 0.9
        coverage = float(np.mean(cdf_at(upper, p, centres, y) <= 0.9 + 1e-12))
        best = min(best, (round(abs(coverage - middle), 9), loss, float(t)))
    return best[2]
