"""vLLM's default: first come, first served (preempt the latest arrival first)."""

from __future__ import annotations

from services.replica.core.sequence import Sequence
from services.replica.policies.base import QueuePolicy


class FCFSPolicy(QueuePolicy):
    name = "fcfs"

    def key(self, seq: Sequence, now_s: float) -> tuple[float, ...]:
        return (seq.request.arrival_s,)
