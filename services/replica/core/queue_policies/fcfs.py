"""vLLM's default: first come, first served (preempt the latest arrival first).

"First come" is the order requests reached this engine (`Sequence.enqueue_s`), as vLLM's FCFS
queue appends them, not their arrival at the mesh: a request a global queue held (flow control,
a pool) joins the line behind the ones placed here before it, however early it arrived.
"""

from __future__ import annotations

from services.replica.core.queue_policies.base import QueuePolicy
from services.replica.core.sequence import Sequence


class FCFSPolicy(QueuePolicy):
    name = "fcfs"

    def key(self, seq: Sequence, now_s: float) -> tuple[float, ...]:
        return (seq.enqueue_s,)
