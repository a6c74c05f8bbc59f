"""The waiting queue: a heap on the policy key with lazy deletion.

Each push stamps the sequence with a fresh token; a heap entry whose token is not the sequence's
current one (re-keyed, popped, discarded, pushed again) or whose sequence left WAITING is stale.
"""

from __future__ import annotations

import heapq
import itertools

from services.replica.core.queue_policies.base import QueuePolicy
from services.replica.core.sequence import SeqStatus, Sequence


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
        self._enter(seq, self.policy.key(seq, now_s))
        self._live += 1

    def discard(self, seq: Sequence) -> None:
        """Forget `seq` (the caller changes its status); its heap entry becomes stale."""
        seq.queue_token = -1
        self._live -= 1

    def _enter(self, seq: Sequence, key: tuple[float, ...]) -> None:
        seq.key = key
        seq.queue_token = next(self._seq)
        heapq.heappush(self._heap, (key, seq.queue_token, seq))

    @staticmethod
    def _live_entry(token: int, seq: Sequence) -> bool:
        return seq.status is SeqStatus.WAITING and token == seq.queue_token

    def peek(self, now_s: float) -> Sequence | None:
        """The head in policy order, after letting the policy re-key it."""
        while self._heap:
            _, token, seq = self._heap[0]
            if not self._live_entry(token, seq):
                heapq.heappop(self._heap)
                continue
            new = self.policy.requeue_key(seq, now_s)
            if new is None:
                return seq
            heapq.heappop(self._heap)
            self._enter(seq, new)
        return None

    def pop(self, now_s: float) -> Sequence | None:
        seq = self.peek(now_s)
        if seq is not None:
            heapq.heappop(self._heap)
            seq.queue_token = -1
            self._live -= 1
        return seq

    def take(self, now_s: float) -> Sequence:
        """Take the head out for the rest of a step, still waiting (`restore` puts it back)."""
        seq = self.pop(now_s)
        assert seq is not None
        return seq

    def restore(self, seq: Sequence) -> None:
        """Put back a sequence `take` took, with the key it had (vLLM's skipped waiting
        requests go back to the front of its queue)."""
        self._enter(seq, seq.key)
        self._live += 1

    def sequences(self) -> list[Sequence]:
        return [s for _, token, s in self._heap if self._live_entry(token, s)]
