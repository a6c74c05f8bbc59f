"""vLLM's priority scheduling: lower `priority` first, then arrival time."""

from __future__ import annotations

from services.replica.core.queue_policies.base import QueuePolicy
from services.replica.core.sequence import Sequence


class PriorityPolicy(QueuePolicy):
    name = "priority"

    def key(self, seq: Sequence, now_s: float) -> tuple[float, ...]:
        return (float(seq.request.priority), seq.request.arrival_s)
