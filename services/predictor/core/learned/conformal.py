"""Calibrating the learned predictor's spread on traffic it was not trained on.

The spread is changed by a stretch in log length around each distribution's median m: with
scale a (log units, 0: unchanged), the warped CDF is

    CDF'(log u) = CDF(m + (log u - m) e^-a),

interpolated linearly in log u between bucket bounds (as online_layer.shift_probs), so the output
stays a bucket distribution: the median stays, every other quantile q moves to m + e^a (q - m)
(a > 0 widens, a < 0 narrows). The scale of a request is

    a = (1 - model_conf) a_cold + a_model,

- a_cold, offline, source held out: the temperature (calibration.py) is fitted on prompt folds
  of the training sources, so it knows nothing of a new source's level. `fit_cold_scale` picks
  a_cold on predictions for whole sources held out of training (each training source predicted
  by a model fitted on the others): the grid value whose p90 coverage, averaged over those
  sources with equal weight, is nearest the target (a split conformal calibration over sources).
  It applies in full to models the history has never seen (model_conf 0) and fades as their
  history fills.
- a_model, online: per-model quantile tracking (Angelopoulos, Candes and Tibshirani, "Conformal
  PID control for time series prediction", NeurIPS 2023, eq. 2: q_{t+1} = q_t + eta (err_t -
  alpha)): after each completion a_model += step (1{y > p90} - target_miss), bounded to
  [-max_scale, max_scale]. Over any run of T completions of a model its p90 misses stay within
  (2 max_scale + step) / (step T) of target_miss, whatever the traffic.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from services.predictor.core.learned.calibration import cdf_at

COLD_SCALES = np.linspace(-1.0, 1.5, 51)
"""Grid of the offline cold scale a_cold (log units; e^a from 0.37 to 4.5)."""


class ConformalConfig(BaseModel):
    """Run-time knobs of the p90 calibration (the offline a_cold is in the model file)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    enabled: bool = True
    """Apply the offline cold scale and track each model's p90 misses online (False: neither)."""

    target_miss: float = Field(default=0.1, gt=0.0, lt=1.0)
    """Share of completions longer than the predicted p90 that the tracking aims at."""

    step: float = Field(default=0.05, gt=0.0, le=1.0)
    """Change of a_model (log units) per completion, times (miss - target_miss)."""

    max_scale: float = Field(default=1.0, gt=0.0, le=3.0)
    """Bound on |a_model| (log units)."""

    max_models: int = Field(default=1024, ge=1)
    """Models whose a_model is kept (the least recently observed is dropped first)."""


def log_medians(upper: Sequence[int], probs: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per row, the log length where the CDF (linear in log u between bounds) reaches 0.5."""
    grid = np.concatenate([[0.0], np.log(np.asarray(upper, dtype=np.float64))])
    cdf = np.cumsum(probs, axis=1)
    k = np.minimum((cdf < 0.5).sum(axis=1), len(upper) - 1)
    rows = np.arange(len(probs))
    below = np.where(k > 0, cdf[rows, np.maximum(k - 1, 0)], 0.0)
    frac = (0.5 - below) / np.maximum(probs[rows, k], 1e-300)
    out: NDArray[np.float64] = grid[k] + np.clip(frac, 0.0, 1.0) * (grid[k + 1] - grid[k])
    return out


def warp_probs(
    upper: Sequence[int], probs: NDArray[np.float64], scale: NDArray[np.float64]
) -> NDArray[np.float64]:
    """n x K probabilities with row i stretched by scale[i] around its median (module
    docstring); rows with scale 0 are returned unchanged."""
    scale = np.asarray(scale, dtype=np.float64)
    if not scale.any():
        return probs
    log_u = np.log(np.asarray(upper, dtype=np.float64))
    grid = np.concatenate([[0.0], log_u])
    cdf = np.hstack([np.zeros((len(probs), 1)), np.cumsum(probs, axis=1)])
    m = log_medians(upper, probs)[:, None]
    q = np.clip(m + (log_u[None, :] - m) * np.exp(-scale)[:, None], 0.0, grid[-1])
    j = np.clip(np.searchsorted(grid, q, side="right") - 1, 0, len(grid) - 2)
    rows = np.arange(len(probs))[:, None]
    lo, hi = cdf[rows, j], cdf[rows, j + 1]
    t = (q - grid[j]) / (grid[j + 1] - grid[j])
    f = lo + t * (hi - lo)
    f[:, -1] = 1.0
    out = np.maximum(np.diff(np.hstack([np.zeros((len(probs), 1)), f]), axis=1), 0.0)
    out = np.where(scale[:, None] == 0.0, probs, out)
    result: NDArray[np.float64] = out / out.sum(axis=1, keepdims=True)
    return result


def p90_misses(
    upper: Sequence[int],
    probs: NDArray[np.float64],
    centres: NDArray[np.float64],
    tokens: NDArray[np.float64],
) -> NDArray[np.bool_]:
    """Per row, whether the true length is above the row's p90 (its CDF there exceeds 0.9)."""
    out: NDArray[np.bool_] = cdf_at(upper, probs, centres, tokens) > 0.9 + 1e-12
    return out


def fit_cold_scale(
    upper: Sequence[int],
    centres: NDArray[np.float64],
    held_out: Sequence[tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]],
    target_coverage: float = 0.9,
) -> float:
    """a_cold from predictions on held-out sources (module docstring).

    held_out: per source, (probs n x K, true tokens n, cold weights n = 1 - model_conf). Returns
    the COLD_SCALES value whose coverage averaged over the sources is nearest target_coverage
    (the smallest |a| among ties); 0 without sources."""
    if not held_out:
        return 0.0
    best = (np.inf, 0.0, 0.0)  # (|gap|, |a|, a)
    for a in COLD_SCALES:
        covs = []
        for probs, tokens, cold in held_out:
            warped = warp_probs(upper, probs, a * cold)
            covs.append(1.0 - float(np.mean(p90_misses(upper, warped, centres, tokens))))
        key = (round(abs(float(np.mean(covs)) - target_coverage), 9), abs(float(a)), float(a))
        best = min(best, key)
    return best[2]


class OnlineConformal:
    """Per-model quantile tracking of p90 misses (module docstring)."""

    def __init__(self, config: ConformalConfig) -> None:
        self.config = config
        self.scales: OrderedDict[str, float] = OrderedDict()
        self.observations = 0

    def scale(self, model: str) -> float:
        """a_model of `model` (0 when never observed)."""
        return self.scales.get(model, 0.0)

    def observe(self, model: str, missed: bool) -> None:
        """One completion of `model`: was it longer than the p90 it was predicted with?"""
        c = self.config
        a = self.scale(model) + c.step * ((1.0 if missed else 0.0) - c.target_miss)
        self.scales[model] = float(np.clip(a, -c.max_scale, c.max_scale))
        self.scales.move_to_end(model)
        while len(self.scales) > c.max_models:
            self.scales.popitem(last=False)
        self.observations += 1

    def to_dict(self) -> dict[str, object]:
        """JSON-able state (models in least recently observed order)."""
        return {
            "observations": self.observations,
            "scales": [[m, a] for m, a in self.scales.items()],
        }

    def load_dict(self, d: Mapping[str, object]) -> None:
        """Restore to_dict output; refuses non-finite scales."""
        scales = d.get("scales") or []
        if not isinstance(scales, list):
            raise ValueError("model file: conformal.scales must be a list of [model, scale]")
        self.scales = OrderedDict()
        for i, item in enumerate(scales):
            m, a = item
            if not np.isfinite(float(a)):
                raise ValueError(f"model file: conformal.scales[{i}] must be finite")
            self.scales[str(m)] = float(a)
        self.observations = int(d.get("observations") or 0)  # type: ignore[call-overload]
