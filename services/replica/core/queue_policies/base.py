"""The queue-policy interface: how an engine orders its waiting queue and picks preemption victims.

Lower keys run first. Keys are computed when a sequence enters the waiting queue; `requeue_key`
lets a policy re-key the head when it is inspected (e.g. demote a request that can no longer meet
its deadline). The preemption victim is the running sequence with the highest `key`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from services.replica.core.sequence import Sequence


class QueuePolicy(ABC):
    name: ClassVar[str]
    evict_for_waiting: ClassVar[bool] = False
    """If True, a waiting head with a lower key than a running sequence preempts it for memory."""
    deadline_ordered: ClassVar[bool] = False
    """If True, waiting requests are served earliest TTFT deadline first: a new request waits
    only behind those due before it (what the scheduler's TTFT guard predicts from)."""

    @abstractmethod
    def key(self, seq: Sequence, now_s: float) -> tuple[float, ...]:
        """Sort key; lower is served first."""

    def requeue_key(self, seq: Sequence, now_s: float) -> tuple[float, ...] | None:
        """A new key for the queue head, or None to keep it. Default: keys never change."""
        return None
