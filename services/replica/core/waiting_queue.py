"""The waiting queue: a heap on the policy key with lazy deletion (aborts leave tombstones)."""

from __future__ import annotations

import heapq
import itertools

from services.replica.core.sequence import SeqStatus, Sequence
from services.replica.policies.base import QueuePolicy


class WaitingQueue:
    def __init__(self, policy: QueuePolicy) -> None:
        self.policy = policy
        self._heap: list[tuple[tuple[float, ...], int, Sequence]] = []
        self._seq = itertools.count()
        self._live = 0

    def __len__(self) -> int:
        return self._live

    def push(self, seq: Sequence, now_s: float) -> None:
        seq.status = SeqStatus.WAITING
        seq.key = self.policy.key(seq, now_s)
        heapq.heappush(self._heap, (seq.key, next(self._seq), seq))
        self._live += 1

    def discard(self, seq: Sequence) -> None:
        """Forget `seq` (already marked non-WAITING by the caller); its heap entry is skipped."""
        self._live -= 1

    def peek(self, now_s: float) -> Sequence | None:
        """The head in policy order, after letting the policy re-key it."""
        while self._heap:
            key, _, seq = self._heap[0]
            if seq.status is not SeqStatus.WAITING or key != seq.key:
                heapq.heappop(self._heap)  # tombstone or stale entry
                continue
            new = self.policy.requeue_key(seq, now_s)
            if new is None:
                return seq
            seq.key = new
            heapq.heapreplace(self._heap, (new, next(self._seq), seq))
        return None

    def pop(self, now_s: float) -> Sequence | None:
        seq = self.peek(now_s)
        if seq is not None:
            heapq.heappop(self._heap)
            self._live -= 1
        return seq

    def sequences(self) -> list[Sequence]:
        return [s for k, _, s in self._heap if s.status is SeqStatus.WAITING and k == s.key]
