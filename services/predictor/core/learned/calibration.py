"""Calibrating the learned predictor's spread: a temperature on the threshold logits.

The ordinal model's bucket probabilities come from sigmoid(logit / T). `fit_temperature` picks T
on out-of-sample predictions: the least log loss of the true bucket among the grid values whose
p90 covers a share of the true lengths inside a band around 0.9 (else the coverage nearest the
band's middle). Coverage is computed without building distributions: y <= p90 exactly when the
CDF at y (`cdf_at`, the within-bucket shape of distribution.summarize) is at most 0.9.
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
    """The grid temperature with the least mean log loss of the true buckets among those whose
    p90 covers a share of `tokens` inside `p90_band`; if none does, the one whose coverage is
    nearest the band's middle."""
    buckets = np.minimum(np.searchsorted(np.asarray(upper), tokens, side="left"), len(upper) - 1)
    y = tokens.astype(np.float64)
    rows = np.arange(len(buckets))
    middle = (p90_band[0] + p90_band[1]) / 2.0
    best_in: tuple[float, float] | None = None  # (log loss, T)
    best_out = (math.inf, 1.0)  # (|coverage - middle|, T)
    for t in TEMPERATURES:
        p = ordinal.probs_from_logits(logits, float(t))
        loss = float(-np.mean(np.log(p[rows, buckets])))
        # y <= p90 exactly when the CDF at y is at most 0.9
        coverage = float(np.mean(cdf_at(upper, p, centres, y) <= 0.9 + 1e-12))
        if p90_band[0] <= coverage <= p90_band[1]:
            if best_in is None or loss < best_in[0]:
                best_in = (loss, float(t))
        elif abs(coverage - middle) < best_out[0]:
            best_out = (abs(coverage - middle), float(t))
    return best_in[1] if best_in is not None else best_out[1]
