"""FIFO batch former: fixed-size chunks in arrival order, cut early only by memory.

This is the "default batching algorithm (FIFO)" UELLM compares SLO-ODBS against (§5, Fig. 4)
and the static batching of SCLS's SLS baseline (FCFS, fixed batch size). It ignores SLOs and
output lengths; a chunk is closed before `batch_size` only when the next request would push the
padded batch (longest context, longest predicted output or the slice) past estimator.fits.
The first request of a chunk always opens it, so every pool item lands in exactly one batch.
"""

from __future__ import annotations

from services.scheduler.core.batching.base import FormedBatch, PoolItem, make_batch
from services.scheduler.core.batching.estimator import BatchEstimator
from services.scheduler.core.batching.slo_odbs import check_slice_iterations


class FIFOFormer:
    """Arrival-ordered (ties by request id) chunks of at most `batch_size` that fit in memory."""

    def __init__(self, batch_size: int = 16, slice_iterations: int | None = None) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        check_slice_iterations(slice_iterations)
        self.batch_size = batch_size
        self.slice_iterations = slice_iterations
        self.name = "fifo"

    def form(
        self, pool: list[PoolItem], estimator: BatchEstimator, now_s: float
    ) -> list[FormedBatch]:
        groups: list[list[PoolItem]] = []
        current: list[PoolItem] = []
        padded = longest = 0
        for q in sorted(pool, key=lambda i: (i.arrival_s, i.request_id)):
            grown_padded = max(padded, q.context_tokens)
            grown_longest = max(longest, q.predicted_output_tokens)
            iters = self.slice_iterations or grown_longest
            if not current or (
                len(current) < self.batch_size
                and estimator.fits(len(current) + 1, grown_padded, iters)
            ):
                current.append(q)
                padded, longest = grown_padded, grown_longest
            else:
                groups.append(current)
                current = [q]
                padded, longest = q.context_tokens, q.predicted_output_tokens
        if current:
            groups.append(current)
        return [make_batch(g, estimator, self.slice_iterations) for g in groups]
