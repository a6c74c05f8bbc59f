"""Clairvoyant routing for the `oracle` reference: the instance that would give the earliest TTFT.

With true output lengths known, estimate on each instance when this request's first token would
come under an EDF queue:
- compute: prefill of the waiting work ahead of it in EDF order (deadline not later than its own)
  plus its own prompt, at p1 per token, with one decode step of the running batch interleaved per
  token budget's worth of prefill;
- memory: if KV room is short, the time until enough running requests finish (their true
  remaining tokens) to free it;
- the model load time when the model is not GPU-active.
Ties go to the instance with less total outstanding work.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from services.scheduler.core.cluster_view import InstanceView, WorkItem
from services.scheduler.core.routers.base import Router
from shared.domain import Request


def ttft_estimate_s(inst: InstanceView, request: Request) -> float:
    prof = inst.profile(request.model)
    items = inst.work_items()
    deadline = request.ttft_deadline_abs_s
    ahead = [w for w in items if not w.running and w.ttft_deadline_abs_s <= deadline]
    running = [w for w in items if w.running]
    prefill = request.input_tokens + sum(w.prefill_tokens for w in ahead)
    steps = math.ceil(prefill / inst.token_budget)
    decode_step = (
        prof.decode_time_s(sum(w.context_tokens for w in running) / len(running), len(running))
        if running
        else prof.prefill.p4
    )
    t = prefill * prof.prefill.p1 + steps * decode_step
    t = max(t, _memory_wait_s(prof.kv_capacity_tokens, running, ahead, request, decode_step))
    if inst.status().active_model != request.model:
        t += prof.weight_bytes / prof.swap_bytes_s
    return t


def _memory_wait_s(
    capacity: int,
    running: list[WorkItem],
    ahead: list[WorkItem],
    request: Request,
    step_s: float,
) -> float:
    held = sum(w.context_tokens + w.remaining_output_tokens for w in running)
    need = request.input_tokens + sum(w.context_tokens for w in ahead)
    deficit = held + need - capacity
    if deficit <= 0:
        return 0.0
    for w in sorted(running, key=lambda w: w.remaining_output_tokens):
        deficit -= w.context_tokens + w.remaining_output_tokens
        if deficit <= 0:
            return w.remaining_output_tokens * step_s
    return math.inf


class OracleTTFTRouter(Router):
    name = "oracle-ttft"

    def choose(
        self, request: Request, eligible: Sequence[InstanceView], now_s: float
    ) -> InstanceView:
        def cost(inst: InstanceView) -> tuple[float, int]:
            return (ttft_estimate_s(inst, request), inst.status().outstanding_output_tokens)

        return min(eligible, key=cost)
