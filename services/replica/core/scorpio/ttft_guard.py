"""TTFT guard: least-deadline-first early rejection (SCORPIO; see services/replica/README.md).

The waiting queue is ordered least-deadline-first (ties: arrival, then id). Starting at
t0 = max(now, ready) — ready being when the engine can start prefilling — the guard walks the
queue, predicting each request's first token at
    t_i = t0 + Σ_{j<=i, j admitted} T_prefill(j)
and rejects request i, early and with a clear reason, when t_i + margin > its TTFT deadline,
instead of serving it late. A rejected request's prefill is not added to the running sum, so the
requests behind it are not punished for it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class WaitingRequest:
    """A waiting request: absolute times in seconds, prompt tokens still to prefill."""

    request_id: str
    arrival_s: float
    ttft_deadline_abs_s: float
    prefill_tokens: int
    class_name: str = "default"


@dataclass(frozen=True, slots=True)
class Rejection:
    """A request the guard rejects, with a sentence saying why."""

    request_id: str
    reason: str


class TTFTGuard:
    """Rejects waiting requests whose predicted first token would miss the TTFT deadline."""

    def __init__(self, prefill_time_s: Callable[[int], float], margin_s: float = 0.0) -> None:
        if not (math.isfinite(margin_s) and margin_s >= 0):
            raise ValueError(f"margin_s must be finite and >= 0, got {margin_s!r}")
        self._prefill_time_s = prefill_time_s
        self._margin_s = margin_s

    def order(self, waiting: Sequence[WaitingRequest]) -> list[WaitingRequest]:
        """The waiting requests least-deadline-first (ties by arrival, then id)."""
        return sorted(waiting, key=lambda w: (w.ttft_deadline_abs_s, w.arrival_s, w.request_id))

    def check(
        self, waiting: Sequence[WaitingRequest], now_s: float, ready_s: float
    ) -> list[Rejection]:
        """The requests to reject now, in LDF order; the others are predicted to make it."""
        clock = max(now_s, ready_s)
        rejections: list[Rejection] = []
        for w in self.order(waiting):
            prefill = self._prefill_time_s(w.prefill_tokens)
            if not (math.isfinite(prefill) and prefill >= 0):
                raise ValueError(
                    f"prefill_time_s({w.prefill_tokens}) must be finite and >= 0, got {prefill!r}"
                )
            first_token_s = clock + prefill
            if first_token_s + self._margin_s > w.ttft_deadline_abs_s:
                rejections.append(Rejection(w.request_id, self._reason(w, first_token_s)))
            else:
                clock = first_token_s
        return rejections

    def _reason(self, w: WaitingRequest, first_token_s: float) -> str:
        margin = f" (+ margin {self._margin_s:.3f} s)" if self._margin_s > 0 else ""
        return (
            f"rejected early by the TTFT guard: predicted first token at "
            f"+{first_token_s - w.arrival_s:.3f} s after arrival{margin} exceeds the TTFT SLO "
            f"of {w.ttft_deadline_abs_s - w.arrival_s:.3f} s (class {w.class_name})"
        )
