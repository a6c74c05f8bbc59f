"""vLLM's priority scheduling: lower `priority` first, then arrival time."""

from __future__ import annotations

from services.replica.core.sequence import Sequence
from services.replica.policies.base import QueuePolicy


class PriorityPolicy(QueuePolicy):
    name = "priority"

    def key(self, seq: Sequence, now_s: float) -> tuple[float, ...]:
        return (float(seq.request.priority), seq.request.arrival_s)
