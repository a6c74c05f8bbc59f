"""Baseline length predictors for the held-out comparison (fit on training examples).

- global-mean: one distribution for every request (train mean; train quantiles; modal bucket).
- per-model-mean: the same per model (the global one for a model with too few examples).
- input-length-regression: least squares y = a + b·input_tokens per model (global fit for a model
  with too few examples); p50 / p90 add that fit's residual quantiles; bucket of the p50.

All lengths are tokens under the same count as the examples (dataset.TOKENIZER).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from services.predictor.core.learned.dataset import LengthExample
from services.predictor.core.learned.metrics import BatchPrediction

MIN_EXAMPLES_PER_MODEL = 30
"""A model with fewer training examples uses the global statistics."""


class Baseline(Protocol):
    """A fitted-on-examples length predictor with batched point predictions."""

    name: str

    def fit(self, examples: Sequence[LengthExample]) -> None: ...

    def predict_batch(self, examples: Sequence[LengthExample]) -> BatchPrediction: ...


@dataclass(frozen=True)
class _Summary:
    mean: float
    p50: float
    p90: float
    bucket: int


def _summary(y: NDArray[np.float64], upper: Sequence[int]) -> _Summary:
    idx = np.minimum(np.searchsorted(np.asarray(upper), y, side="left"), len(upper) - 1)
    counts = np.bincount(idx, minlength=len(upper))
    return _Summary(
        float(y.mean()),
        float(np.quantile(y, 0.5)),
        float(np.quantile(y, 0.9)),
        int(counts.argmax()),
    )


def _tokens(examples: Sequence[LengthExample]) -> NDArray[np.float64]:
    return np.asarray([e.output_tokens for e in examples], dtype=np.float64)


class GlobalMean:
    name = "global-mean"

    def __init__(self, upper: Sequence[int]) -> None:
        self.upper = tuple(upper)
        self._all: _Summary | None = None

    def fit(self, examples: Sequence[LengthExample]) -> None:
        self._all = _summary(_tokens(examples), self.upper)

    def predict_batch(self, examples: Sequence[LengthExample]) -> BatchPrediction:
        if self._all is None:
            raise ValueError(f"{self.name}: not fitted")
        n, s = len(examples), self._all
        return BatchPrediction(
            np.full(n, s.mean), np.full(n, s.p50), np.full(n, s.p90), np.full(n, s.bucket)
        )


class PerModelMean:
    name = "per-model-mean"

    def __init__(self, upper: Sequence[int]) -> None:
        self.upper = tuple(upper)
        self._all: _Summary | None = None
        self._models: dict[str, _Summary] = {}

    def fit(self, examples: Sequence[LengthExample]) -> None:
        y = _tokens(examples)
        self._all = _summary(y, self.upper)
        models = np.asarray([e.model for e in examples])
        self._models = {}
        for m in sorted(set(models.tolist())):
            ym = y[models == m]
            if len(ym) >= MIN_EXAMPLES_PER_MODEL:
                self._models[m] = _summary(ym, self.upper)

    def predict_batch(self, examples: Sequence[LengthExample]) -> BatchPrediction:
        if self._all is None:
            raise ValueError(f"{self.name}: not fitted")
        rows = [self._models.get(e.model, self._all) for e in examples]
        return BatchPrediction(
            np.asarray([r.mean for r in rows]),
            np.asarray([r.p50 for r in rows]),
            np.asarray([r.p90 for r in rows]),
            np.asarray([r.bucket for r in rows], dtype=np.int64),
        )


@dataclass(frozen=True)
class _Line:
    a: float
    b: float
    r50: float
    r90: float


def _line(x: NDArray[np.float64], y: NDArray[np.float64]) -> _Line:
    design = np.column_stack([np.ones_like(x), x])
    (a, b), *_ = np.linalg.lstsq(design, y, rcond=None)
    resid = y - (a + b * x)
    return _Line(float(a), float(b), float(np.quantile(resid, 0.5)), float(np.quantile(resid, 0.9)))


class InputLengthRegression:
    name = "input-length-regression"

    def __init__(self, upper: Sequence[int]) -> None:
        self.upper = tuple(upper)
        self._all: _Line | None = None
        self._models: dict[str, _Line] = {}

    def fit(self, examples: Sequence[LengthExample]) -> None:
        x = np.asarray([e.input_tokens for e in examples], dtype=np.float64)
        y = _tokens(examples)
        self._all = _line(x, y)
        models = np.asarray([e.model for e in examples])
        self._models = {}
        for m in sorted(set(models.tolist())):
            sel = models == m
            if int(sel.sum()) >= MIN_EXAMPLES_PER_MODEL:
                self._models[m] = _line(x[sel], y[sel])

    def predict_batch(self, examples: Sequence[LengthExample]) -> BatchPrediction:
        if self._all is None:
            raise ValueError(f"{self.name}: not fitted")
        lines = [self._models.get(e.model, self._all) for e in examples]
        x = np.asarray([e.input_tokens for e in examples], dtype=np.float64)
        mean = np.maximum(
            np.asarray([ln.a + ln.b * xi for ln, xi in zip(lines, x, strict=True)]), 1.0
        )
        p50 = np.maximum(mean + np.asarray([ln.r50 for ln in lines]), 1.0)
        p90 = np.maximum(mean + np.asarray([ln.r90 for ln in lines]), p50)
        bucket = np.minimum(np.searchsorted(np.asarray(self.upper), p50), len(self.upper) - 1)
        return BatchPrediction(mean, p50, p90, bucket.astype(np.int64))
