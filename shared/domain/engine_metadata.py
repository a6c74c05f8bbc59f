"""What the control plane tells an engine's scheduler about a request: the metadata slomesh puts
in vLLM's `SamplingParams.extra_args["slomesh"]` (the ingress sends it in the request's
`vllm_xargs`; the replica's scheduler hook keys its queue policies on it).

Times are on the wall clock (`time.time()`, the axis of vLLM's own `Request.arrival_time`), so
every request of one engine shares a time axis whatever clock the control plane keeps.
"""

from __future__ import annotations

from typing import Any

from shared.domain.request import Request

EXTRA_ARGS_KEY = "slomesh"
"""Key of slomesh's metadata in SamplingParams.extra_args (and in the request's vllm_xargs)."""


def engine_metadata(
    request: Request, wall_now_s: float, age_s: float = 0.0, first_token_emitted: bool = False
) -> dict[str, Any]:
    """`request`'s metadata for the engine, `age_s` seconds after its arrival at `wall_now_s`."""
    return {
        "request_id": request.request_id,
        "arrival_wall_s": wall_now_s - max(0.0, age_s),
        "ttft_deadline_s": request.slo.ttft_deadline_s,
        "tpot_target_s": request.slo.tpot_target_s,
        "priority": request.priority,
        "tenant": request.tenant,
        "model": request.model,
        "first_token_emitted": first_token_emitted,
    }
