"""What slomesh tells vLLM's scheduler about a request, and how the hook turns it back into a
`Sequence` a QueuePolicy can key. Pure Python: no vLLM import.

The metadata rides in `SamplingParams.extra_args["slomesh"]`, which vLLM serialises with the
request into the engine-core process (where the scheduler runs); a side table in the caller's
process would not be visible there, and vLLM re-keys request ids internally anyway. Times are put
on the engine's wall clock (`time.time()`, the axis of vLLM's own `Request.arrival_time`) when the
request is submitted, so every request in one engine shares a time axis whatever clock the control
plane uses.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from services.replica.core.sequence import Sequence
from shared.domain import SLO, Clock, Request
from shared.domain.engine_metadata import EXTRA_ARGS_KEY, engine_metadata

POLICY_CONFIG_KEY = "slomesh_queue_policy"
"""Key of the queue-policy name in vLLM's VllmConfig.additional_config."""
SCHEDULER_CLS = "services.replica.vllm.scheduler_hook.SLOMeshScheduler"
ASYNC_SCHEDULER_CLS = "services.replica.vllm.scheduler_hook.SLOMeshAsyncScheduler"
DEFAULT_TTFT_DEADLINE_S = 3600.0
"""TTFT deadline assumed for requests that reach vLLM without slomesh metadata."""


def hook_engine_kwargs(
    queue_policy: str,
    scorpio: dict[str, Any] | None = None,
    decode_coeffs: list[float] | None = None,
) -> dict[str, Any]:
    """AsyncEngineArgs keyword arguments that install the hook with `queue_policy`.

    vLLM's own policy is set to "priority" so requests may carry a priority and vLLM picks
    preemption victims by (priority, arrival); the waiting-queue order is the slomesh policy's.
    """
    extra: dict[str, Any] = {POLICY_CONFIG_KEY: queue_policy}
    if scorpio is not None:
        extra["slomesh_scorpio"] = scorpio  # read by scorpio_hook.ScorpioStep
        if decode_coeffs is not None:
            extra["slomesh_decode_coeffs"] = decode_coeffs
    return {
        "scheduler_cls": SCHEDULER_CLS,
        "scheduling_policy": "priority",
        "additional_config": extra,
    }


def request_metadata(
    request: Request,
    clock: Clock,
    *,
    first_token_emitted: bool = False,
    wall_now_s: float | None = None,
) -> dict[str, Any]:
    """The metadata of `request` (times on the control plane's `clock`) for extra_args."""
    wall = time.time() if wall_now_s is None else wall_now_s
    age_s = max(0.0, clock.now() - request.arrival_s)
    return engine_metadata(request, wall, age_s, first_token_emitted)


def sequence_from_vllm(
    request_id: str,
    *,
    num_prompt_tokens: int,
    max_tokens: int | None,
    num_output_tokens: int,
    priority: int,
    arrival_time_s: float,
    extra_args: Mapping[str, Any] | None,
) -> Sequence:
    """A `Sequence` standing for one of vLLM's requests, for a QueuePolicy to key.

    Without slomesh metadata the request is keyed by vLLM's arrival time and priority with a
    `DEFAULT_TTFT_DEADLINE_S` deadline. It entered the engine at `arrival_time_s` (vLLM's
    `Request.arrival_time`, on the wall clock).
    """
    meta = extra_args.get(EXTRA_ARGS_KEY) if extra_args else None
    if isinstance(meta, Mapping):
        arrival = float(meta.get("arrival_wall_s", arrival_time_s))
        ttft = float(meta.get("ttft_deadline_s", DEFAULT_TTFT_DEADLINE_S))
        prio = int(meta.get("priority", priority))
        tenant = str(meta.get("tenant", "default"))
        model = str(meta.get("model", "vllm"))
        emitted = bool(meta.get("first_token_emitted", False))
        tpot_raw = meta.get("tpot_target_s")
        tpot = float(tpot_raw) if tpot_raw else None
    else:
        tpot = None
        arrival, ttft, prio, tenant, model, emitted = (
            arrival_time_s,
            DEFAULT_TTFT_DEADLINE_S,
            priority,
            "default",
            "vllm",
            False,
        )
    req = Request(
        request_id=request_id,
        model=model,
        input_tokens=max(1, num_prompt_tokens),
        max_tokens=max(1, max_tokens or 1),
        arrival_s=max(0.0, arrival),
        slo=SLO(ttft_deadline_s=ttft if ttft > 0 else DEFAULT_TTFT_DEADLINE_S, tpot_target_s=tpot),
        tenant=tenant,
        priority=prio,
    )
    # the engine's own arrival stamp: where vLLM's FCFS line puts it (a preempted request
    # keyed again keeps its place)
    seq = Sequence(request=req, enqueue_s=arrival_time_s, num_output_tokens=num_output_tokens)
    if emitted or num_output_tokens > 0:
        seq.first_token_s = arrival  # the policies only test whether a first token was sent
    return seq
