"""slomesh queue policies inside vLLM's scheduler, through vLLM 0.32's `scheduler_cls` hook.

vLLM's v1 `Scheduler` admits waiting requests in the order of its `waiting` queue (a
`RequestQueue`: FCFS deque or (priority, arrival) heap) whenever a running slot and KV blocks are
free. `SLOMeshScheduler` is the stock scheduler with that queue (and `kv_holding_waiting`, the
queue of waiting requests that still hold KV blocks) replaced by a `PolicyRequestQueue`, a heap on
a slomesh `QueuePolicy` key. Everything else — budgets, chunked prefill, preemption, KV
management — is vLLM's own code. The policy code stays pure: `slo_metadata.sequence_from_vllm`
adapts each vLLM `Request` to the `Sequence` the policy keys.

Plumbing (all of it survives the trip into vLLM's engine-core process, where the scheduler runs):
- `scheduler_cls="services.replica.vllm.scheduler_hook.SLOMeshScheduler"` (an import string, so
  it resolves in any process); `VLLMEngine` switches to `SLOMeshAsyncScheduler` when vLLM enables
  async scheduling (GPUs; vLLM's CPU platform turns it off);
- the policy name in `additional_config["slomesh_queue_policy"]`;
- per-request deadline, arrival and priority in `SamplingParams.extra_args["slomesh"]`.

What vLLM keeps: its own preemption victim choice when KV runs out (with scheduling_policy
"priority", the running request with the largest (priority, arrival)); a request vLLM preempts
re-enters the policy queue by its key instead of going to the front.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.core.sched.request_queue import RequestQueue
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.request import Request

from services.replica.core.queue_policies import QUEUE_POLICIES, QueuePolicy
from services.replica.core.sequence import Sequence
from services.replica.vllm.scorpio_hook import ScorpioStep
from services.replica.vllm.slo_metadata import POLICY_CONFIG_KEY, sequence_from_vllm

logger = logging.getLogger(__name__)


def sequence_of(request: Request) -> Sequence:
    """The slomesh view of a vLLM request (prompt size, progress, priority, SLO metadata)."""
    params = request.sampling_params
    return sequence_from_vllm(
        request.request_id,
        num_prompt_tokens=request.num_prompt_tokens,
        max_tokens=request.max_tokens,
        num_output_tokens=request.num_output_tokens,
        priority=request.priority,
        arrival_time_s=request.arrival_time,
        extra_args=params.extra_args if params is not None else None,
    )


class PolicyRequestQueue(RequestQueue):
    """vLLM's RequestQueue ordered by a slomesh QueuePolicy key (lower first), lazily deleted.

    Keys are computed on entry (wall-clock `now`); `requeue_key` may re-key the head when it is
    inspected, as in slomesh's own WaitingQueue. "Prepending" a request (vLLM does it for preempted
    or skipped ones) re-enters it by key, as vLLM's PriorityRequestQueue does.
    """

    def __init__(self, policy: QueuePolicy, now: Callable[[], float] = time.time) -> None:
        self.policy = policy
        self._now = now
        self._heap: list[tuple[tuple[float, ...], int, str]] = []
        self._live: dict[str, tuple[Request, Sequence]] = {}
        self._tokens = itertools.count()

    def _enter(self, request: Request, seq: Sequence, key: tuple[float, ...]) -> None:
        seq.key = key
        seq.queue_token = next(self._tokens)
        self._live[request.request_id] = (request, seq)
        heapq.heappush(self._heap, (key, seq.queue_token, request.request_id))

    def add_request(self, request: Request) -> None:
        now = self._now()
        seq = sequence_of(request)
        self._enter(request, seq, self.policy.key(seq, now))

    def peek_request(self) -> Request:
        now = self._now()
        while self._heap:
            _, token, rid = self._heap[0]
            entry = self._live.get(rid)
            if entry is None or entry[1].queue_token != token:
                heapq.heappop(self._heap)  # stale: removed, popped or re-keyed
                continue
            request, seq = entry
            new_key = self.policy.requeue_key(seq, now)
            if new_key is None:
                return request
            heapq.heappop(self._heap)
            self._enter(request, seq, new_key)
        raise IndexError("peek from an empty queue")

    def pop_request(self) -> Request:
        request = self.peek_request()
        heapq.heappop(self._heap)
        del self._live[request.request_id]
        return request

    def prepend_request(self, request: Request) -> None:
        self.add_request(request)

    def prepend_requests(self, requests: Iterable[Request]) -> None:
        for request in requests:
            self.add_request(request)

    def remove_request(self, request: Request) -> None:
        self._live.pop(request.request_id, None)

    def remove_requests(self, requests: Iterable[Request]) -> None:
        for request in requests:
            self._live.pop(request.request_id, None)

    def __bool__(self) -> bool:
        return bool(self._live)

    def __len__(self) -> int:
        return len(self._live)

    def __iter__(self) -> Iterator[Request]:
        entries = sorted(self._live.values(), key=lambda e: (e[1].key, e[1].queue_token))
        return iter([request for request, _ in entries])


def policy_name_of(scheduler: Scheduler) -> str:
    """The queue policy configured for this scheduler (additional_config), default "fcfs"."""
    extra = scheduler.vllm_config.additional_config
    name = extra.get(POLICY_CONFIG_KEY, "fcfs") if isinstance(extra, dict) else "fcfs"
    return str(name)


def install_policy_queues(scheduler: Scheduler) -> str:
    """Replace the scheduler's (empty, just built) waiting queues by policy-ordered ones."""
    name = policy_name_of(scheduler)
    scheduler.waiting = PolicyRequestQueue(QUEUE_POLICIES.create(name))
    scheduler.kv_holding_waiting = PolicyRequestQueue(QUEUE_POLICIES.create(name))
    logger.info("slomesh scheduler hook: waiting queue ordered by queue policy '%s'", name)
    return name


class SLOMeshScheduler(Scheduler):
    """vLLM's scheduler with its waiting queue ordered by a slomesh queue policy, and SCORPIO's
    credit batching and VBS admission when configured (services/replica/vllm/scorpio_hook.py)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.slomesh_queue_policy = install_policy_queues(self)
        self.slomesh_scorpio = ScorpioStep.from_additional_config(
            self.vllm_config.additional_config
        )

    def schedule(self, throttle_prefills: bool = False) -> SchedulerOutput:
        if self.slomesh_scorpio is None:
            return super().schedule(throttle_prefills)
        base = super().schedule
        return self.slomesh_scorpio.run(self, lambda: base(throttle_prefills))


class SLOMeshAsyncScheduler(AsyncScheduler):
    """The same for vLLM's async scheduler (used when async scheduling is on, i.e. on GPUs)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.slomesh_queue_policy = install_policy_queues(self)
        self.slomesh_scorpio = ScorpioStep.from_additional_config(
            self.vllm_config.additional_config
        )

    def schedule(self, throttle_prefills: bool = False) -> SchedulerOutput:
        if self.slomesh_scorpio is None:
            return super().schedule(throttle_prefills)
        base = super().schedule
        return self.slomesh_scorpio.run(self, lambda: base(throttle_prefills))
