"""Prediction log that scores the RWT estimator: R² of predicted vs measured waits (QLM Fig. 20).

The scheduler calls `predict` when it estimates a request's wait and `observe` when the request
actually starts; `r2_by` reports R² per bin of queue depth at prediction time, the paper's
"R² 0.99 with >= 4 groups queued". Score mean predictions (RWTEstimator(z=0)) for accuracy:
the decision quantile (z > 0) is deliberately biased upward and lowers R².

R² = 1 − SS_res / SS_tot over the paired (predicted, measured) waits. It is None (never NaN)
when undefined: fewer than 2 pairs, or SS_tot = 0 (all measured waits equal). Inputs must be
finite. Memory is bounded: at most `max_pairs` scored pairs and `max_pending` predictions
awaiting observation are kept; beyond either cap the oldest entry is dropped first (FIFO), so
the scores describe the most recent `max_pairs` requests. Observations without a pending
prediction (never predicted, dropped, or already observed) are ignored.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

BinKey = Literal["groups_queued", "queue_size"]

DEFAULT_EDGES = (0, 1, 2, 4, 8)
"""Default bins of groups queued: 0, 1, 2-3, 4-7, 8+."""


@dataclass(frozen=True, slots=True)
class WaitPair:
    """One scored request: its predicted and measured wait and the queue it saw."""

    request_id: str
    predicted_wait_s: float
    measured_wait_s: float
    queue_size: int
    """Requests queued ahead of it (or in its virtual queue) when predicted."""
    groups_queued: int
    """Request groups queued ahead of it when predicted."""


def r2_score(predicted: Sequence[float], measured: Sequence[float]) -> float | None:
    """1 − SS_res/SS_tot; None when fewer than 2 pairs or SS_tot = 0."""
    if len(predicted) != len(measured):
        raise ValueError("predicted and measured must have the same length")
    if len(measured) < 2:
        return None
    mean = math.fsum(measured) / len(measured)
    ss_tot = math.fsum((y - mean) ** 2 for y in measured)
    if ss_tot == 0.0:
        return None
    ss_res = math.fsum((y - p) ** 2 for p, y in zip(predicted, measured, strict=True))
    return 1.0 - ss_res / ss_tot


def _bin_label(lo: int, hi: int | None) -> str:
    if hi is None:
        return f"{lo}+"
    return str(lo) if hi == lo + 1 else f"{lo}-{hi - 1}"


class RWTAccuracy:
    """Bounded log of (predicted, measured) waits with overall and binned R²."""

    def __init__(self, max_pairs: int = 100_000, max_pending: int = 100_000) -> None:
        if max_pairs < 1 or max_pending < 1:
            raise ValueError("max_pairs and max_pending must be >= 1")
        self._pairs: deque[WaitPair] = deque(maxlen=max_pairs)
        self._pending: OrderedDict[str, tuple[float, int, int]] = OrderedDict()
        self._max_pending = max_pending

    def predict(
        self, request_id: str, predicted_wait_s: float, queue_size: int, groups_queued: int
    ) -> None:
        """Record a prediction; a later one for the same pending id replaces it (latest wins)."""
        if not math.isfinite(predicted_wait_s):
            raise ValueError(f"predicted_wait_s must be finite, got {predicted_wait_s}")
        if queue_size < 0 or groups_queued < 0:
            raise ValueError("queue_size and groups_queued must be >= 0")
        self._pending.pop(request_id, None)
        self._pending[request_id] = (predicted_wait_s, queue_size, groups_queued)
        while len(self._pending) > self._max_pending:
            self._pending.popitem(last=False)

    def observe(self, request_id: str, measured_wait_s: float) -> bool:
        """Pair the measured wait with its prediction; False (ignored) when none is pending."""
        if not math.isfinite(measured_wait_s):
            raise ValueError(f"measured_wait_s must be finite, got {measured_wait_s}")
        entry = self._pending.pop(request_id, None)
        if entry is None:
            return False
        pred, qsize, groups = entry
        self._pairs.append(WaitPair(request_id, pred, measured_wait_s, qsize, groups))
        return True

    @property
    def pending(self) -> int:
        return len(self._pending)

    def pairs(self) -> tuple[WaitPair, ...]:
        return tuple(self._pairs)

    def __len__(self) -> int:
        return len(self._pairs)

    def r2(self) -> float | None:
        return r2_score(
            [p.predicted_wait_s for p in self._pairs], [p.measured_wait_s for p in self._pairs]
        )

    def r2_by(
        self, edges: Sequence[int] = DEFAULT_EDGES, key: BinKey = "groups_queued"
    ) -> list[tuple[str, int, float | None]]:
        """(label, n, R²) per bin [edges[i], edges[i+1]), the last bin open-ended ("8+").

        `key` picks the binned quantity (groups queued or queue size at prediction time).
        Edges must be strictly increasing; pairs below edges[0] fall in no bin. Empty bins are
        listed with n = 0 and R² None.
        """
        if not edges or any(b <= a for a, b in pairwise(edges)):
            raise ValueError(f"edges must be non-empty and strictly increasing, got {edges}")
        if key not in ("groups_queued", "queue_size"):
            raise ValueError(f"key must be 'groups_queued' or 'queue_size', got {key!r}")
        bounds: list[tuple[int, int | None]] = [
            (lo, edges[i + 1] if i + 1 < len(edges) else None) for i, lo in enumerate(edges)
        ]
        rows: list[tuple[str, int, float | None]] = []
        for lo, hi in bounds:
            sel = [
                p
                for p in self._pairs
                if getattr(p, key) >= lo and (hi is None or getattr(p, key) < hi)
            ]
            pred = [p.predicted_wait_s for p in sel]
            meas = [p.measured_wait_s for p in sel]
            rows.append((_bin_label(lo, hi), len(sel), r2_score(pred, meas)))
        return rows
