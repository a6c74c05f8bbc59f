"""SCORPIO's TPOT guards inside vLLM's scheduler (the `scheduler_cls` hook adapts, the policy
code in services/replica/core/scorpio/ decides).

Each `schedule()` call is one engine iteration. Before vLLM's own scheduler runs:
- credit batching: the decoding requests that hold no whole credit this iteration are taken out
  of `scheduler.running` (they keep their KV blocks), so vLLM schedules only the others; they are
  put back, in their old order, right after. vLLM already handles running requests that a step
  does not schedule (a full token budget does the same), so nothing else changes;
- VBS admission (when decode coefficients are configured): the waiting queue is walked in policy
  order and only as many requests as keep the estimated TPOT under the tightest STP may join;
  the cap is applied through `max_num_running_reqs` for this one call.
The TTFT guard is not run here: a request finished by the scheduler itself would leave vLLM's
front end waiting; the live mesh's admission core answers unattainable requests instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from vllm.v1.request import Request

from services.replica.core.scorpio.credit import CreditBatcher
from services.replica.core.scorpio.tpot_model import DecodeTPOTModel
from services.replica.core.scorpio.vbs import Candidate, VBSAdmission
from shared.domain.profile import DecodeCoeffs
from shared.domain.scorpio import ScorpioConfig

T = TypeVar("T")

SCORPIO_CONFIG_KEY = "slomesh_scorpio"
"""Key of the ScorpioConfig (a dict) in VllmConfig.additional_config."""
DECODE_COEFFS_KEY = "slomesh_decode_coeffs"
"""Key of the fitted decode coefficients [d1, d2, d3, d4] (enables VBS admission)."""


def _stp_s(request: Request, default_s: float) -> float:
    params = request.sampling_params
    extra = params.extra_args if params is not None else None
    meta = extra.get("slomesh") if extra else None
    value = meta.get("tpot_target_s") if isinstance(meta, dict) else None
    return float(value) if value else default_s


def _decoding(request: Request) -> bool:
    return request.num_output_tokens > 0 and request.num_tokens - request.num_computed_tokens == 1


class ScorpioStep:
    def __init__(self, config: ScorpioConfig, decode: DecodeCoeffs | None) -> None:
        self.config = config
        self.credits = CreditBatcher(config.credit_epsilon)
        self.vbs = (
            VBSAdmission(DecodeTPOTModel(decode), config.tpot_safety_factor, config.tpot_slo_margin)
            if decode is not None and config.vbs_admission
            else None
        )
        self.skipped_decodes = 0
        self.admissions_blocked = 0

    @classmethod
    def from_additional_config(cls, extra: Any) -> ScorpioStep | None:
        if not isinstance(extra, dict) or SCORPIO_CONFIG_KEY not in extra:
            return None
        coeffs = extra.get(DECODE_COEFFS_KEY)
        decode = DecodeCoeffs(*map(float, coeffs)) if coeffs else None
        return cls(ScorpioConfig.model_validate(extra[SCORPIO_CONFIG_KEY]), decode)

    def run(self, scheduler: Any, base_schedule: Callable[[], T]) -> T:
        default = self.config.default_tpot_s
        running: list[Request] = list(scheduler.running)
        hidden: set[str] = set()
        if self.config.credit_batching:
            decoding = [r for r in running if _decoding(r)]
            chosen = set(
                self.credits.select([(r.request_id, _stp_s(r, default)) for r in decoding])
            )
            hidden = {r.request_id for r in decoding if r.request_id not in chosen}
        visible = [r for r in running if r.request_id not in hidden]
        saved_cap = scheduler.max_num_running_reqs
        # vLLM 0.32 admits up to max_num_active_reqs and asserts running <= max_num_running_reqs
        # after the step: both caps move together, or the engine core dies on that assertion
        saved_active = getattr(scheduler, "max_num_active_reqs", None)
        cap = saved_cap - len(hidden)
        if self.vbs is not None:
            cap = min(cap, len(visible) + self._admissible(scheduler, running))
        scheduler.running = visible
        scheduler.max_num_running_reqs = max(len(visible), cap)
        if saved_active is not None:
            scheduler.max_num_active_reqs = min(saved_active, scheduler.max_num_running_reqs)
        self.skipped_decodes += len(hidden)
        try:
            return base_schedule()
        finally:
            if saved_active is not None:
                scheduler.max_num_active_reqs = saved_active
            after = scheduler.running
            still = {r.request_id for r in after}
            old = {r.request_id for r in running}
            scheduler.running = [
                r for r in running if r.request_id in hidden or r.request_id in still
            ] + [r for r in after if r.request_id not in old]
            scheduler.max_num_running_reqs = saved_cap

    def _admissible(self, scheduler: Any, running: list[Request]) -> int:
        """How many waiting requests (in queue order) keep the estimated TPOT within bounds."""
        assert self.vbs is not None
        default = self.config.default_tpot_s
        batch = [Candidate(_stp_s(r, default), r.num_tokens) for r in running]
        free = self.config.vbs_untargeted_free
        targeted = any(_stp_s(r, 0.0) for r in running)
        admitted = 0
        for request in scheduler.waiting:
            cand = Candidate(_stp_s(request, default), request.num_tokens)
            targeted = targeted or bool(_stp_s(request, 0.0))
            guarded = targeted or not free  # vbs_untargeted_free: no TPOT SLO to guard
            if batch and guarded and not self.vbs.decide(batch, cand).admit:
                self.admissions_blocked += 1
                break
            batch.append(cand)
            admitted += 1
        return admitted
