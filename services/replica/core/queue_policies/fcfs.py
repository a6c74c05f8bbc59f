"""vLLM's default: first come, first served (preempt the latest arrival first)."""

from __future__ import annotations

from services.replica.core.queue_policies.base import QueuePolicy
from services.replica.core.sequence import Sequence


class FCFSPolicy(QueuePolicy):
    name = "fcfs"

    def key(self, seq: Sequence, now_s: float) -> tuple[float, ...]:
        return (seq.request.arrival_s,)
