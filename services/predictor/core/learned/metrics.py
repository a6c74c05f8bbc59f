"""Held-out metrics of length predictors (pure: latency is measured by the caller and passed in).

Per predictor, on examples with true output lengths y:

- MAE: mean |predicted mean − y| in tokens.
- Kendall tau (tau-b, scipy.stats.kendalltau) of the predicted means against y: does the predictor
  rank requests by length? (Undefined, shown as "n/a", for a constant predictor.)
- bucket accuracy: share of requests whose most likely bucket holds y.
- p50 / p90 coverage: share with y <= predicted p50 / p90 (calibrated: about 0.5 / 0.9).
- ms/request: wall time of one batched prediction over all examples, per example.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.stats import kendalltau

from shared.domain.length_distribution import LengthDistribution


@dataclass(frozen=True, eq=False)
class BatchPrediction:
    """Point summaries of n predictions: mean, p50, p90 (tokens) and the predicted bucket index."""

    mean: NDArray[np.float64]
    p50: NDArray[np.float64]
    p90: NDArray[np.float64]
    bucket: NDArray[np.int64]

    def __post_init__(self) -> None:
        n = len(self.mean)
        if not (len(self.p50) == len(self.p90) == len(self.bucket) == n):
            raise ValueError("batch prediction: mean, p50, p90 and bucket differ in length")


def from_distributions(
    dists: Sequence[LengthDistribution], upper: Sequence[int]
) -> BatchPrediction:
    """Point summaries of distributions; the bucket is the most likely of the buckets `upper`
    (a distribution over other buckets is first summed into them by each bucket's upper bound;
    exact when its bounds include every bound of `upper`)."""
    bounds = np.asarray(upper)
    best = []
    for d in dists:
        into = np.minimum(np.searchsorted(bounds, d.bucket_upper_tokens), len(bounds) - 1)
        best.append(int(np.argmax(np.bincount(into, d.bucket_probs, minlength=len(bounds)))))
    return BatchPrediction(
        mean=np.asarray([d.mean_tokens for d in dists], dtype=np.float64),
        p50=np.asarray([d.p50_tokens for d in dists], dtype=np.float64),
        p90=np.asarray([d.p90_tokens for d in dists], dtype=np.float64),
        bucket=np.asarray(best, dtype=np.int64),
    )


@dataclass(frozen=True)
class MetricRow:
    """One predictor's held-out metrics (module docstring); kendall_tau None when undefined."""

    predictor: str
    n: int
    mae_tokens: float
    kendall_tau: float | None
    bucket_accuracy: float
    p50_coverage: float
    p90_coverage: float
    ms_per_request: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def evaluate(
    name: str,
    true_tokens: Sequence[int] | NDArray[np.int64],
    pred: BatchPrediction,
    upper: Sequence[int],
    ms_per_request: float | None = None,
) -> MetricRow:
    """Metrics of `pred` against the true lengths over buckets `upper`."""
    y = np.asarray(true_tokens, dtype=np.float64)
    if len(y) != len(pred.mean) or len(y) == 0:
        raise ValueError("evaluate: need one prediction per true length, at least one")
    tau: float | None = None
    if np.ptp(pred.mean) > 0:
        t = float(kendalltau(pred.mean, y).statistic)
        tau = t if math.isfinite(t) else None
    true_bucket = np.minimum(np.searchsorted(np.asarray(upper), y, side="left"), len(upper) - 1)
    return MetricRow(
        predictor=name,
        n=len(y),
        mae_tokens=float(np.mean(np.abs(pred.mean - y))),
        kendall_tau=tau,
        bucket_accuracy=float(np.mean(pred.bucket == true_bucket)),
        p50_coverage=float(np.mean(y <= pred.p50)),
        p90_coverage=float(np.mean(y <= pred.p90)),
        ms_per_request=ms_per_request,
    )


def markdown_table(rows: Sequence[MetricRow]) -> str:
    """The rows as a markdown table."""
    head = (
        "| predictor | n | MAE (tokens) | Kendall tau | bucket acc | p50 cov | p90 cov "
        "| ms/request |"
    )
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        tau = "n/a" if r.kendall_tau is None else f"{r.kendall_tau:.3f}"
        ms = "n/a" if r.ms_per_request is None else f"{r.ms_per_request:.4f}"
        lines.append(
            f"| {r.predictor} | {r.n} | {r.mae_tokens:.1f} | {tau} | {r.bucket_accuracy:.3f} "
            f"| {r.p50_coverage:.3f} | {r.p90_coverage:.3f} | {ms} |"
        )
    return "\n".join(lines)
