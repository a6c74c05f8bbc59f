"""Earliest TTFT deadline first (the EDF baseline of QLM §7)."""

from __future__ import annotations

from services.replica.core.queue_policies.base import QueuePolicy
from services.replica.core.sequence import Sequence


class EDFPolicy(QueuePolicy):
    name = "edf"
    deadline_ordered = True

    def key(self, seq: Sequence, now_s: float) -> tuple[float, ...]:
        return (seq.request.ttft_deadline_abs_s, seq.request.arrival_s)
