"""Online recalibration layer of the learned predictor: fast residual learning on a new stream.

The prior (the ordinal model) learns online only through small constant SGD steps over ~17k
weights, so a new model's or source's habits take thousands of completions to show. This layer
learns from every completion a shift delta of the prior's distribution in log length:

    s = sum_k p_k log c_k                          (the prior's expected log length)
    delta(x) = w . z(x),   z = [1, s, dense features, model slot (one-hot), nb residual, nb sim]

w is fitted on the residuals r = log(y) - s by recursive least squares with forgetting factor
lambda (exponentially weighted ridge regression, Haykin, "Adaptive Filter Theory", ch. 10:
k = P z / (lambda + z' P z), w += k (r - w' z), P = (P - k z' P) / lambda), starting at w = 0
with P = I / ridge: with no observations the prior is unchanged, and on traffic the prior
already fits the residuals average out near 0.

Neighbour memory: the last `memory_size` observed prompts, each as its n-gram row folded into
`memory_dims` columns (index mod dims, L2-normalised), with its residual. A new prompt's
neighbour feature is the similarity-weighted mean residual of its `neighbours` most similar
remembered prompts with cosine >= `min_similarity`, times the top similarity; the same prompt
answered earlier (by any model) carries over how much longer than predicted it ran.

Gate (no forgetting of the prior): the layer keeps decayed prequential squared errors, in log
length, of the prior alone (r^2) and of the layer (r - delta)^2, each delta taken before its own
observation; the shift applied is g * delta with g = clip((e_prior - e_layer) /
(gate_margin * e_prior), 0, 1): on traffic the prior already fits the layer stays off, and it
comes in as soon as (and as far as) it predicts better.

The shifted distribution: CDF'(u) = CDF(u e^-delta), the CDF interpolated linearly in log u
between bucket bounds (bucket centres unchanged), so the output stays an ordinal distribution.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

_FIXED = 4
"""z columns besides the dense block and model slots: 1, s, neighbour residual, similarity."""


class OnlineLayerConfig(BaseModel):
    """Knobs of the online recalibration layer (run-time; its learned state is in the file)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    enabled: bool = True
    """Shift the prior's predictions by the layer's learned residual (False: the prior alone)."""

    forgetting: float = Field(default=0.999, gt=0.9, le=1.0)
    """RLS forgetting factor lambda per observation (1: never forget)."""

    ridge: float = Field(default=20.0, gt=0.0)
    """RLS prior precision (larger: the shift grows more slowly from 0)."""

    model_slots: int = Field(default=16, ge=1, le=256)
    """Hashed one-hot slots of the model name (a per-model offset)."""

    memory_size: int = Field(default=2000, ge=0)
    """Observed prompts remembered for the neighbour feature (0: no memory)."""

    memory_dims: int = Field(default=512, ge=16, le=4096)
    """Columns the n-gram rows are folded into for the neighbour search."""

    neighbours: int = Field(default=3, ge=1)
    """Most similar remembered prompts averaged."""

    min_similarity: float = Field(default=0.5, ge=0.0, le=1.0)
    """Cosine below which a remembered prompt is not a neighbour."""

    gate_half_life_observations: float = Field(default=200.0, gt=0.0)
    """Half-life of the gate's decayed squared errors (module docstring)."""

    gate_margin: float = Field(default=0.05, gt=0.0, le=1.0)
    """Relative error reduction over the prior at which the shift is applied in full."""

    max_shift_log: float = Field(default=2.0, gt=0.0)
    """Bound on |delta| (log tokens): no single shift moves lengths more than e^this."""


class OnlineLayer:
    """RLS residual shift with a neighbour memory (module docstring)."""

    def __init__(self, config: OnlineLayerConfig, n_dense: int) -> None:
        self.config = config
        self.n_dense = int(n_dense)
        self.width = _FIXED + self.n_dense + config.model_slots
        self.w = np.zeros(self.width)
        self.p = np.eye(self.width) / config.ridge
        self.memory = np.zeros((config.memory_size, config.memory_dims), dtype=np.float32)
        self.residuals = np.zeros(config.memory_size)
        self.stored = 0
        self.observations = 0
        self.errors = np.zeros(2)
        """Decayed squared errors: (prior alone, layer)."""

    # --- inputs ----------------------------------------------------------------------------

    def fold(self, text: sp.csr_matrix) -> NDArray[np.float32]:
        """n x memory_dims L2-normalised folded n-gram rows (zero rows stay zero)."""
        dims = self.config.memory_dims
        n = text.shape[0]
        rows = np.repeat(np.arange(n), np.diff(text.indptr))
        flat = (
            np.bincount(rows * dims + text.indices % dims, weights=text.data, minlength=n * dims)
            .reshape(n, dims)
            .astype(np.float64)
        )
        norms = np.linalg.norm(flat, axis=1, keepdims=True)
        out: NDArray[np.float32] = np.divide(
            flat, norms, out=np.zeros_like(flat), where=norms > 0
        ).astype(np.float32)
        return out

    def neighbour(self, folded: NDArray[np.float32]) -> NDArray[np.float64]:
        """n x 2: (similarity-weighted neighbour residual times top similarity, top similarity)."""
        n = folded.shape[0]
        out = np.zeros((n, 2))
        filled = min(self.stored, self.config.memory_size)
        if filled == 0:
            return out
        # einsum's own loop, not BLAS: a threaded gemv stalls for ~20 ms on a busy host
        sims = np.einsum("id,jd->ij", folded, self.memory[:filled])
        k = min(self.config.neighbours, filled)
        for i in range(n):
            idx = np.argpartition(-sims[i], k - 1)[:k] if k < filled else np.arange(filled)
            s = sims[i, idx].astype(np.float64)
            ok = s >= self.config.min_similarity
            if not ok.any():
                continue
            s, r = s[ok], self.residuals[idx[ok]]
            top = float(s.max())
            out[i] = (float((s * r).sum() / s.sum()) * top, top)
        return out

    def inputs(
        self,
        dense: NDArray[np.float64],
        models: Sequence[str],
        prior_log_mean: NDArray[np.float64],
        folded: NDArray[np.float32],
    ) -> NDArray[np.float64]:
        """n x width rows z (module docstring)."""
        n = dense.shape[0]
        slots = np.zeros((n, self.config.model_slots))
        for i, m in enumerate(models):
            slots[i, zlib.crc32(m.encode()) % self.config.model_slots] = 1.0
        nb = self.neighbour(folded)
        return np.column_stack([np.ones(n), prior_log_mean, nb, dense, slots])

    # --- prediction and learning -----------------------------------------------------------

    def raw_shift(self, z: NDArray[np.float64]) -> NDArray[np.float64]:
        """The layer's delta (log tokens) per row of z, bounded by max_shift_log, ungated."""
        bound = self.config.max_shift_log
        out: NDArray[np.float64] = np.clip(z @ self.w, -bound, bound)
        return out

    @property
    def gate(self) -> float:
        """Share of the shift applied, in [0, 1] (module docstring)."""
        prior, layer = self.errors
        if prior <= 0.0:
            return 0.0
        return float(np.clip((prior - layer) / (self.config.gate_margin * prior), 0.0, 1.0))

    def shift(self, z: NDArray[np.float64]) -> NDArray[np.float64]:
        """The applied shift (log tokens) per row of z: the gated raw_shift."""
        out: NDArray[np.float64] = self.gate * self.raw_shift(z)
        return out

    def observe(self, z: NDArray[np.float64], folded: NDArray[np.float32], residual: float) -> None:
        """Learn one completion: its row z, folded prompt (all zero: none) and log(y) - s."""
        decay = 2.0 ** (-1.0 / self.config.gate_half_life_observations)
        before = float(self.raw_shift(z[None, :])[0])
        self.errors = decay * self.errors + np.asarray([residual**2, (residual - before) ** 2])
        lam = self.config.forgetting
        pz = self.p @ z
        gain = pz / (lam + float(z @ pz))
        self.w += gain * (residual - float(z @ self.w))
        self.p = (self.p - np.outer(gain, pz)) / lam
        self.p = (self.p + self.p.T) / 2.0
        self.observations += 1
        size = self.config.memory_size
        if size and folded.any():
            slot = self.stored % size
            self.memory[slot] = folded
            self.residuals[slot] = residual
            self.stored += 1

    # --- persistence -----------------------------------------------------------------------

    def arrays(self) -> dict[str, NDArray[np.generic]]:
        """The learned state for the model file (only the filled memory rows)."""
        filled = min(self.stored, self.config.memory_size)
        return {
            "layer_w": self.w.copy(),
            "layer_p": self.p.copy(),
            "layer_memory": self.memory[:filled].copy(),
            "layer_residuals": self.residuals[:filled].copy(),
            "layer_counts": np.asarray([self.stored, self.observations], dtype=np.int64),
            "layer_errors": self.errors.copy(),
        }

    def load_arrays(self, arrays: Mapping[str, NDArray[np.generic]]) -> None:
        """Restore `arrays()` output; refuses shapes that do not fit this config."""
        w = np.asarray(arrays["layer_w"], dtype=np.float64)
        p = np.asarray(arrays["layer_p"], dtype=np.float64)
        mem = np.asarray(arrays["layer_memory"], dtype=np.float32)
        res = np.asarray(arrays["layer_residuals"], dtype=np.float64)
        stored, observations = (int(v) for v in np.asarray(arrays["layer_counts"]))
        size, dims = self.config.memory_size, self.config.memory_dims
        if w.shape != (self.width,) or p.shape != (self.width, self.width):
            raise ValueError(f"model file: layer_w must be {self.width} long, layer_p square")
        if mem.shape[0] != res.shape[0] or mem.shape[0] > size or mem.shape[1:] != (dims,):
            raise ValueError(f"model file: layer_memory must be <= {size} x {dims}")
        if not (np.isfinite(w).all() and np.isfinite(p).all()):
            raise ValueError("model file: the online layer's weights must be finite")
        self.w, self.p = w, p
        self.memory[: mem.shape[0]] = mem
        self.residuals[: res.shape[0]] = res
        self.stored, self.observations = stored, observations
        self.errors = np.asarray(arrays["layer_errors"], dtype=np.float64).reshape(2)


def shift_probs(
    upper: Sequence[int], probs: NDArray[np.float64], delta: NDArray[np.float64]
) -> NDArray[np.float64]:
    """n x K bucket probabilities with each row's distribution moved by delta in log length."""
    log_u = np.log(np.asarray(upper, dtype=np.float64))
    grid = np.concatenate([[0.0], log_u])
    cdf = np.hstack([np.zeros((probs.shape[0], 1)), np.cumsum(probs, axis=1)])
    out = np.empty_like(probs)
    for i in range(probs.shape[0]):
        if delta[i] == 0.0:
            out[i] = probs[i]
            continue
        f = np.interp(log_u - delta[i], grid, cdf[i], left=0.0, right=1.0)
        f[-1] = 1.0
        out[i] = np.diff(np.concatenate([[0.0], f]))
    out = np.maximum(out, 0.0)
    result: NDArray[np.float64] = out / out.sum(axis=1, keepdims=True)
    return result
