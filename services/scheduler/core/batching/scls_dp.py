"""SCLS serving-time-oriented DP batching (SCLS Algorithm 1, Eq. 10; scheduler README, "SCLS").

Sort the pool by context length ascending; T[i] is the least total serving time of the first i
requests, T[0] = 0, and

    T[i] = min_{0 < j <= i, fits(i-j+1, L_i, S)} T[j-1] + T_serve(i-j+1, L_i, S)

where L_i, the context of the i-th sorted request, is the padded length of the batch [j..i] and
T_serve(N, L, S) = T_prefill(N, L) + Σ_{k=1..S} tau_decode(L+k, N) (SCLS Eqs. 4-6; the
profile evaluates it in closed form). Backtracking the recorded split points gives the batches.

A batch of one is always a candidate, as in Algorithm 1 (line 10): a request too large for memory
even alone still gets its own batch so the engine rejects it with a clear error instead of the
request silently vanishing. Ties keep the smaller batch (Algorithm 1 only updates on a strict
improvement while growing the batch).

Complexity O(n·N_max) with N_max = estimator.max_batch_size: memory use grows with the batch
size (and, with no slice, with the running max of predicted outputs), so the candidates for each
i are a contiguous run of sizes 1..k_max, evaluated together with numpy.
"""

from __future__ import annotations

from typing import cast

import numpy as np
from numpy.typing import NDArray

from services.scheduler.core.batching.base import FormedBatch, PoolItem, make_batch
from services.scheduler.core.batching.estimator import BatchEstimator

FloatArray = NDArray[np.float64]


def _serve_times(
    estimator: BatchEstimator, sizes: FloatArray, length: int, iterations: int | FloatArray
) -> FloatArray:
    """T_serve(size, length, iterations) for every candidate size (iterations scalar or per size).

    The profile's closed form is plain arithmetic, so it is evaluated on the arrays directly; an
    estimator whose serve_time_s only takes scalars is called once per candidate instead.
    """
    try:
        out = np.asarray(
            estimator.serve_time_s(cast(int, sizes), length, cast(int, iterations)),
            dtype=np.float64,
        )
        if out.shape == sizes.shape:
            return out
    except TypeError:
        pass
    its = np.broadcast_to(np.asarray(iterations, dtype=np.float64), sizes.shape)
    return np.array(
        [estimator.serve_time_s(int(n), length, int(s)) for n, s in zip(sizes, its, strict=True)],
        dtype=np.float64,
    )


def _largest_fitting(
    estimator: BatchEstimator, k_max: int, length: int, iters: NDArray[np.int64]
) -> int:
    """Largest k in 1..k_max with fits(k, length, iters[k-1]); 1 if none fits.

    fits is monotone in k here (size grows, iterations never shrink), so binary search.
    """
    lo, hi = 1, k_max  # invariant: the answer lies in lo..hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if estimator.fits(mid, length, int(iters[mid - 1])):
            lo = mid
        else:
            hi = mid - 1
    return lo


class SCLSDPFormer:
    """SCLS Algorithm 1: split the sorted pool into contiguous batches of least total T_serve."""

    name = "scls-dp"
    slice_iterations: int | None
    """Decode steps per batch (S); None runs each batch to its longest predicted output."""

    def __init__(self, slice_iterations: int | None = 128) -> None:
        if slice_iterations is not None and slice_iterations < 1:
            raise ValueError(f"slice_iterations must be >= 1 or None, got {slice_iterations}")
        self.slice_iterations = slice_iterations

    def form(
        self, pool: list[PoolItem], estimator: BatchEstimator, now_s: float
    ) -> list[FormedBatch]:
        """Batches covering every item of `pool` exactly once, by ascending padded length."""
        items = sorted(pool, key=lambda r: (r.context_tokens, r.arrival_s, r.request_id))
        n = len(items)
        if n == 0:
            return []
        outputs = np.array([r.predicted_output_tokens for r in items], dtype=np.int64)
        cap = estimator.max_batch_size
        best = np.zeros(n + 1, dtype=np.float64)  # T[0..n]
        split = np.zeros(n + 1, dtype=np.int64)  # P[i]: the batch ending at i starts after P[i]
        for i in range(1, n + 1):
            length = items[i - 1].context_tokens
            k_max = min(i, cap)
            if self.slice_iterations is None:
                # iters[k-1]: S of the batch of the last k items, a running max going backwards.
                window = outputs[i - k_max : i][::-1]
                iters_k = np.maximum.accumulate(window)
                k_max = _largest_fitting(estimator, k_max, length, iters_k)
                iters: int | FloatArray = iters_k[:k_max].astype(np.float64)
            else:
                iters = self.slice_iterations
                k_max = max(1, min(k_max, estimator.max_batch(length, iters)))
            sizes = np.arange(1, k_max + 1, dtype=np.float64)
            # Candidate of size k starts right after T[i-k]: T[i-1], T[i-2], ..., T[i-k_max].
            prev = best[i - k_max : i][::-1]
            totals = prev + _serve_times(estimator, sizes, length, iters)
            k = int(np.argmin(totals)) + 1  # first minimum: the smallest batch on ties
            best[i] = totals[k - 1]
            split[i] = i - k
        batches: list[FormedBatch] = []
        i = n
        while i > 0:
            j = int(split[i])
            batches.append(make_batch(items[j:i], estimator, self.slice_iterations))
            i = j
        batches.reverse()
        return batches
