"""Clairvoyant routing for the `oracle` reference: least backlog in seconds, true lengths known.

Backlog = (pending prefill tokens · p1 + outstanding true output tokens · per-token decode cost at
a full batch) on the instance's own profile, plus the model load time if the model is not active.
Heterogeneous GPUs are compared in time, not in request counts.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.scheduler.cluster_view import InstanceHandle
from services.scheduler.routers.base import Router
from shared.domain import Request

_FULL_BATCH = 64
_TYPICAL_CONTEXT = 1024


class OracleBacklogRouter(Router):
    name = "oracle-backlog"

    def choose(
        self, request: Request, eligible: Sequence[InstanceHandle], now_s: float
    ) -> InstanceHandle:
        def backlog_s(inst: InstanceHandle) -> float:
            st = inst.status()
            prof = inst.profile(request.model)
            per_token = prof.decode_time_s(_TYPICAL_CONTEXT, _FULL_BATCH) / _FULL_BATCH
            t = (
                st.pending_prefill_tokens * prof.prefill.p1
                + st.outstanding_output_tokens * per_token
            )
            if st.active_model != request.model:
                t += prof.weight_bytes / prof.swap_bytes_s
            return t

        return min(eligible, key=backlog_s)
