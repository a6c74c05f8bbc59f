"""llm-d's latency-SLO admitter: turn away sheddable work no endpoint can serve within its SLO.

Source read: llm-d/llm-d-router at commit ebab687927f5331c1b39defcb579a07951bce56c,
pkg/epp/framework/plugins/requestcontrol/admitter/latencyslo/plugin.go (`Admit`). A request is
rejected only when all hold:

    criticality < 0 (sheddable)  and  it has a TTFT or TPOT SLO
    and no endpoint k is valid:  TTFT_k <= ttft_slo and TPOT_k <= tpot_slo
    and no endpoint is idle (running_k = 0)  and  none is cold (KV usage_k < 2%)

llm-d takes TTFT_k and TPOT_k from a trained latency predictor (a sidecar model fed with served
requests); here they come from the endpoint's hardware profile, without output lengths:

    TTFT_k = (P_k + L) · p1 + ceil((P_k + L) / token_budget_k) · step_k
    TPOT_k = decode_time(mean context of k's running requests, running_k + 1)

with P_k the prompt tokens of k's waiting requests, L the request's prompt, p1 the profile's
per-token prefill time and step_k one decode step of k's running batch. An endpoint without a
profile has no prediction; with no prediction at all the admitter lets the request in (fail
open, as llm-d does).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from services.scheduler.core.cluster_view import InstanceView, WorkItem
from shared.domain import Request


class LatencySLOAdmitterConfig(BaseModel):
    """llm-d's latency-SLO admitter (its only parameter there names the prediction producer)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    cold_kv_fraction: float = Field(0.02, ge=0, le=1)
    """An endpoint whose KV usage is below this is cold: its predictions are not trusted."""


def predicted_ttft_tpot_s(inst: InstanceView, request: Request) -> tuple[float, float] | None:
    """(TTFT_k, TPOT_k) of `request` on `inst` (module docstring); None without a profile."""
    try:
        prof = inst.profile(request.model)
    except ValueError:
        return None
    items = inst.work_items()
    running = [w for w in items if w.running]
    prefill = request.input_tokens + sum(w.prefill_tokens for w in items if not w.running)
    context = _mean_context(running, request)
    step = prof.decode_time_s(context, max(1, len(running)))
    ttft = prefill * prof.prefill.p1 + math.ceil(prefill / max(1, inst.token_budget)) * step
    tpot = prof.decode_time_s(context, len(running) + 1)
    return ttft, tpot


def predicted_tpot_s(inst: InstanceView, request: Request) -> float | None:
    """TPOT_k of `request` on `inst` alone (module docstring); None without a profile."""
    try:
        prof = inst.profile(request.model)
    except ValueError:
        return None
    running = [w for w in inst.work_items() if w.running]
    return prof.decode_time_s(_mean_context(running, request), len(running) + 1)


def _mean_context(running: Sequence[WorkItem], request: Request) -> float:
    """Mean context of the running requests (the request's prompt when none runs)."""
    if not running:
        return float(request.input_tokens)
    return sum(w.context_tokens for w in running) / len(running)


class LatencySLOAdmitter:
    """Decides at arrival; stateless."""

    def __init__(self, config: LatencySLOAdmitterConfig | None = None) -> None:
        self.config = config or LatencySLOAdmitterConfig()

    def rejection(self, request: Request, eligible: Sequence[InstanceView]) -> str | None:
        """Why `request` is turned away, or None to admit it."""
        slo = request.slo
        if request.criticality >= 0 or not (slo.ttft_deadline_s > 0 or slo.tpot_target_s):
            return None
        best: float | None = None
        for inst in eligible:
            st = inst.status()
            if st.running == 0:
                return None  # an idle endpoint can likely serve it
            if st.kv_total_blocks > 0 and st.kv_used_blocks / st.kv_total_blocks < (
                self.config.cold_kv_fraction
            ):
                return None  # a cold endpoint: predictions unreliable
            pred = predicted_ttft_tpot_s(inst, request)
            if pred is None:
                continue
            ttft, tpot = pred
            if ttft <= slo.ttft_deadline_s and (
                slo.tpot_target_s is None or tpot <= slo.tpot_target_s
            ):
                return None
            best = ttft if best is None else min(best, ttft)
        if best is None:
            return None  # no prediction anywhere: fail open
        return (
            f"latency SLO: no replica can meet it (best predicted TTFT {best:.2f} s, "
            f"SLO {slo.ttft_deadline_s:.2f} s) for sheddable work"
        )
