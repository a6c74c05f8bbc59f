"""The batch-former interface: turn a pool of waiting requests into batches for static engines.

A static-batching engine (HuggingFace-style, SCLS/UELLM's setting) serves one batch at a time:
the batch is padded to its longest context, prefilled, then decoded for a fixed number of
iterations (a slice). Formers decide which requests share a batch; placers decide which instance
runs it. Everything here is metadata and estimates; times are seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from services.scheduler.core.batching.estimator import BatchEstimator


@dataclass(frozen=True, slots=True)
class PoolItem:
    """One request waiting in the global pool for its next batch (or its next slice)."""

    request_id: str
    context_tokens: int
    """Tokens a batch must prefill for it: prompt plus the tokens generated in earlier slices."""
    predicted_output_tokens: int
    """Output tokens it is predicted to still generate (a point estimate, >= 1)."""
    slo_s: float
    """Its latency SLO in seconds (end-to-end deadline if set, else TTFT): UELLM sorts by it."""
    deadline_abs_s: float
    """Absolute time its SLO expires (arrival + slo_s)."""
    arrival_s: float


@dataclass(frozen=True, slots=True)
class FormedBatch:
    """Requests served together: padded to `padded_len`, decoded for `iterations` steps."""

    items: tuple[PoolItem, ...]
    padded_len: int
    iterations: int
    est_time_s: float
    """Estimated serving time T_serve(N, padded_len, iterations) on the target instance type."""

    @property
    def size(self) -> int:
        return len(self.items)


class BatchFormer(Protocol):
    """Split the pool (any order) into batches; every item lands in exactly one batch."""

    name: str

    def form(
        self, pool: list[PoolItem], estimator: BatchEstimator, now_s: float
    ) -> list[FormedBatch]: ...


def make_batch(
    items: list[PoolItem], estimator: BatchEstimator, slice_iterations: int | None
) -> FormedBatch:
    """A FormedBatch of `items`: padded to the longest context, decoded for the slice length
    (or, with no slice, until the longest predicted output is done)."""
    if not items:
        raise ValueError("make_batch: items must not be empty")
    padded = max(i.context_tokens for i in items)
    iters = slice_iterations or max(i.predicted_output_tokens for i in items)
    return FormedBatch(
        items=tuple(items),
        padded_len=padded,
        iterations=iters,
        est_time_s=estimator.serve_time_s(len(items), padded, iters),
    )
