"""Calibrating the learned predictor's p90 online, per model: a stretch around the median.

The spread is changed by a stretch in log length around each distribution's median m: with
scale a (log units, 0: unchanged), the warped CDF is

    CDF'(log u) = CDF(m + (log u - m) e^-a),

interpolated linearly in log u between bucket bounds (as online_layer.shift_probs), so the output
stays a bucket distribution: the median stays, every other quantile q moves to about
m + e^a (q - m) (a > 0 widens, a < 0 narrows).

a = a_shared + a_model is tracked from completions (Angelopoulos, Candes and Tibshirani,
"Conformal PID control for time series prediction", NeurIPS 2023, eq. 2, quantile tracking:
q_{t+1} = q_t + eta (err_t - alpha)): after each completion, with err = 1{y > p90} -
target_miss, a_shared += shared_step err (every model's) and a_model += step err (that model's),
each bounded to [-max_scale, max_scale]. The shared part learns what all traffic shares (e.g. a
new source) from every completion; the per-model part what one model adds. While the parts stay
inside their bounds, the telescoping sum gives: over any T completions of a model, the share
above its predicted p90 is within (2 max_scale + step) / (step T) of target_miss, whatever the
traffic (more precisely the per-model sum plus the shared drift, both bounded). Before any
completion a = 0: the offline calibration (the temperature, calibration.py) alone.

An offline counterpart (a scale for unseen models, fitted on whole training sources held out in
turn) was measured and did not pay: the three sources need opposite corrections
(docs/results/design.md), so it is not here.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from services.predictor.core.learned.calibration import cdf_at


class ConformalConfig(BaseModel):
    """Run-time knobs of the online p90 calibration (its learned state is in the model file)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    enabled: bool = True
    """Track each model's p90 misses and stretch its distributions (False: unchanged)."""

    target_miss: float = Field(default=0.1, gt=0.0, lt=1.0)
    """Share of completions longer than the predicted p90 that the tracking aims at."""

    step: float = Field(default=0.05, gt=0.0, le=1.0)
    """Change of a_model (log units) per completion, times (miss - target_miss)."""

    shared_step: float = Field(default=0.02, ge=0.0, le=1.0)
    """Change of the shared a (every model's, log units) per completion, times (miss -
    target_miss): a model seen a few times starts from what the others learned (0: per model
    only)."""

    max_scale: float = Field(default=1.0, gt=0.0, le=3.0)
    """Bound on |a_shared|, |a_model| and their sum (log units)."""

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


class OnlineConformal:
    """Shared and per-model quantile tracking of p90 misses (module docstring)."""

    def __init__(self, config: ConformalConfig) -> None:
        self.config = config
        self.shared = 0.0
        self.scales: OrderedDict[str, float] = OrderedDict()
        self.observations = 0

    def scale(self, model: str) -> float:
        """The stretch of `model`'s distributions: a_shared + a_model (a_model 0 when never
        observed), bounded."""
        bound = self.config.max_scale
        return float(np.clip(self.shared + self.scales.get(model, 0.0), -bound, bound))

    def observe(self, model: str, missed: bool) -> None:
        """One completion of `model`: was it longer than the p90 it was predicted with?"""
        c = self.config
        err = (1.0 if missed else 0.0) - c.target_miss
        self.shared = float(np.clip(self.shared + c.shared_step * err, -c.max_scale, c.max_scale))
        a = self.scales.get(model, 0.0) + c.step * err
        self.scales[model] = float(np.clip(a, -c.max_scale, c.max_scale))
        self.scales.move_to_end(model)
        while len(self.scales) > c.max_models:
            self.scales.popitem(last=False)
        self.observations += 1

    def to_dict(self) -> dict[str, object]:
        """JSON-able state (models in least recently observed order)."""
        return {
            "observations": self.observations,
            "shared": self.shared,
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
        shared = float(d.get("shared") or 0.0)  # type: ignore[arg-type]
        if not np.isfinite(shared):
            raise ValueError("model file: conformal.shared must be finite")
        self.shared = shared
        self.observations = int(d.get("observations") or 0)  # type: ignore[call-overload]
