"""Seed priors: the histogram a predictor starts from before it has seen any completion.

"uniform" puts equal mass on every bucket (centres at the bucket midpoints). "azure-conv" and
"azure-code" are the output lengths of the packaged Azure LLM inference traces (2023), bucketed,
with add-one smoothing so that no bucket is impossible, and each bucket's centre at the mean of
the trace lengths that fell into it. The traces are read only when such a prior is asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from shared.domain.length_distribution import bucket_midpoints, check_bucket_bounds

SeedPriorName = Literal["uniform", "azure-conv", "azure-code"]


@dataclass(frozen=True, eq=False)
class SeedPrior:
    """Bucket probabilities (summing to 1) and bucket centres (mean tokens within each bucket)."""

    probs: NDArray[np.float64]
    centres: NDArray[np.float64]

    def __post_init__(self) -> None:
        if self.probs.shape != self.centres.shape or self.probs.ndim != 1:
            raise ValueError("seed_prior.probs and seed_prior.centres must be equal-length vectors")
        if bool((self.probs < 0).any()) or not np.isfinite(self.probs).all():
            raise ValueError("seed_prior.probs must be finite and >= 0")
        if abs(float(self.probs.sum()) - 1.0) > 1e-9:
            raise ValueError(f"seed_prior.probs must sum to 1, got {float(self.probs.sum())}")
        if not np.isfinite(self.centres).all():
            raise ValueError("seed_prior.centres must be finite")


def uniform_prior(upper: Sequence[int]) -> SeedPrior:
    """Equal probability per bucket, centres at the midpoints."""
    check_bucket_bounds(upper)
    n = len(upper)
    return SeedPrior(probs=np.full(n, 1.0 / n), centres=bucket_midpoints(upper))


def probs_prior(upper: Sequence[int], probs: Sequence[float]) -> SeedPrior:
    """Given (unnormalised, non-negative) bucket weights, centres at the midpoints."""
    check_bucket_bounds(upper)
    p = np.asarray(probs, dtype=np.float64)
    if p.shape != (len(upper),):
        raise ValueError(f"seed_prior_probs needs {len(upper)} entries (one per bucket)")
    if bool((p < 0).any()) or not np.isfinite(p).all() or float(p.sum()) <= 0:
        raise ValueError("seed_prior_probs must be finite, >= 0 and not all 0")
    return SeedPrior(probs=p / p.sum(), centres=bucket_midpoints(upper))


def histogram_prior(upper: Sequence[int], lengths: Sequence[int] | NDArray[np.int64]) -> SeedPrior:
    """Add-one-smoothed bucket histogram of observed output lengths, centres at bucket means.

    Lengths above the last bound count in the last bucket, at the last bound.
    """
    check_bucket_bounds(upper)
    n = len(upper)
    values = np.asarray(lengths, dtype=np.float64)
    top = float(upper[-1])
    idx = np.minimum(np.searchsorted(np.asarray(upper, dtype=np.float64), values), n - 1)
    counts = np.bincount(idx, minlength=n).astype(np.float64)
    sums = np.bincount(idx, weights=np.minimum(values, top), minlength=n).astype(np.float64)
    mids = bucket_midpoints(upper)
    centres = np.divide(sums, counts, out=mids.copy(), where=counts > 0)
    smoothed = counts + 1.0
    return SeedPrior(probs=smoothed / smoothed.sum(), centres=centres)


def seed_prior(name: SeedPriorName, upper: Sequence[int]) -> SeedPrior:
    """The named seed prior over the given buckets."""
    if name == "uniform":
        return uniform_prior(upper)
    if name in ("azure-conv", "azure-code"):
        from shared.workloads.traces import load_azure_trace

        trace = load_azure_trace("conv" if name == "azure-conv" else "code")
        return histogram_prior(upper, trace.output_tokens)
    raise ValueError(f"unknown seed_prior '{name}'; valid: uniform, azure-conv, azure-code")
