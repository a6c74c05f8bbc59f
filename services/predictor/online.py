"""Online learning, one step at a time: the live service's path and the replay's are the same.

`predict` and `observe` are what `PredictorDeployment.Predict` / `Observe` run (`Batch` runs
`observe` and, over each run of predictions between observations, `predict_many`);
`predict_then_observe` is one request's whole life (predict at admission, learn its true length
when it ends), which `slomesh predictor replay` runs line by line over a stream. All pure: no
clock, no I/O, no global RNG.

Prequential metrics: every prediction is made before its own length is learned, so Kendall tau
and MAE over a stream measure the predictor as it learns. `halves` splits a stream in two (the
second half shows what online learning bought); `sliding_tau` is tau over a sliding window.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import kendalltau

from shared.domain.length_distribution import LengthDistribution
from shared.domain.length_prediction import LengthPredictor
from shared.domain.request import Request


def predict(core: LengthPredictor, request: Request, prompt: str | None) -> LengthDistribution:
    """The Predict step: the output-length distribution of `request` (prompt None: not shared)."""
    return core.predict(request, prompt or None)


def predict_many(
    core: LengthPredictor, requests: Sequence[Request], prompts: Sequence[str | None]
) -> list[LengthDistribution]:
    """`predict` for several requests with no observation between them: what calling it on
    each in turn returns, in one pass of the core's `predict_batch` when it has one (one
    feature pass and matrix product for all: the predictor service's Batch)."""
    many = getattr(core, "predict_batch", None)
    if many is None:
        return [predict(core, r, p) for r, p in zip(requests, prompts, strict=True)]
    result: list[LengthDistribution] = many(list(requests), [p or None for p in prompts])
    return result


def observe(core: LengthPredictor, request: Request, output_tokens: int) -> int:
    """The Observe step: learn `request`'s true length (below 1 counts as 1); the observations
    learned from so far."""
    core.observe(request, max(1, int(output_tokens)))
    return core.observations


def predict_then_observe(
    core: LengthPredictor, request: Request, prompt: str | None, output_tokens: int
) -> LengthDistribution:
    """One request's life: `predict` at admission, then `observe` its true length. Returns the
    prediction made before the length was learned."""
    dist = predict(core, request, prompt)
    observe(core, request, output_tokens)
    return dist


@dataclass(frozen=True, slots=True)
class StreamMetrics:
    """Prequential metrics over a run of lines: Kendall tau-b of predicted means against true
    lengths (None when undefined, e.g. constant predictions) and MAE in tokens."""

    first_line: int
    last_line: int
    n: int
    kendall_tau: float | None
    mae_tokens: float


def _tau(pred: Sequence[float], true: Sequence[int]) -> float | None:
    if len(pred) < 2 or np.ptp(pred) == 0 or np.ptp(true) == 0:
        return None
    t = float(kendalltau(pred, true).statistic)
    return t if math.isfinite(t) else None


def stream_metrics(
    pred_mean: Sequence[float], true_tokens: Sequence[int], start: int, stop: int
) -> StreamMetrics:
    """Metrics of lines [start, stop) (0-based; reported 1-based)."""
    if not 0 <= start < stop <= len(pred_mean) or len(pred_mean) != len(true_tokens):
        raise ValueError(f"stream_metrics: bad range [{start}, {stop}) of {len(pred_mean)}")
    p = np.asarray(pred_mean[start:stop], dtype=np.float64)
    y = np.asarray(true_tokens[start:stop], dtype=np.float64)
    return StreamMetrics(
        first_line=start + 1,
        last_line=stop,
        n=stop - start,
        kendall_tau=_tau(list(p), list(y)),
        mae_tokens=float(np.mean(np.abs(p - y))),
    )


def halves(pred_mean: Sequence[float], true_tokens: Sequence[int]) -> list[StreamMetrics]:
    """Metrics of the first and the second half of a stream (at least 2 lines)."""
    n = len(pred_mean)
    if n < 2:
        raise ValueError(f"halves: need at least 2 lines, got {n}")
    mid = n // 2
    return [
        stream_metrics(pred_mean, true_tokens, 0, mid),
        stream_metrics(pred_mean, true_tokens, mid, n),
    ]


def sliding_tau(
    pred_mean: Sequence[float], true_tokens: Sequence[int], window: int, step: int = 10
) -> list[tuple[int, float | None]]:
    """(last line, 1-based; tau over the `window` lines ending there), every `step` lines, from
    the first full window to the end (empty when the stream is shorter than the window)."""
    if window < 2 or step < 1:
        raise ValueError(f"sliding_tau: window must be >= 2 and step >= 1, got {window}, {step}")
    n = len(pred_mean)
    ends = list(range(window, n + 1, step))
    if ends and ends[-1] != n:
        ends.append(n)
    return [(e, _tau(pred_mean[e - window : e], true_tokens[e - window : e])) for e in ends]
