"""SCORPIO's guards on the continuous-batching engine (SCORPIO §3; see services/replica/README.md).

The policies themselves are pure (services/replica/core/scorpio/); this planner only adapts them
to the simulated engine, exactly as the vLLM `scheduler_cls` hook adapts them to vLLM:
- TTFT guard: before each step, walk the waiting queue least-deadline-first accumulating predicted
  prefill time; reject the requests that cannot get their first token in time (early, with why).
- TPOT guard (VBS admission): the waiting head joins the running batch only if the fitted decode
  model at the virtual batch size VBS(R ∪ {w}) stays under the tightest TPOT target.
- Credit batching: each step every decoding request earns TRP(r) credit; only those holding a
  whole credit decode, so loose requests do not slow the tight ones.
Context for VBS is each request's current context (known exactly), not a predicted midpoint.
The TPOT estimate adds the prefill work that shares the steps (PrefillInterferenceTPOTModel) with
prompt and output lengths measured from this engine's finished requests (an EWMA; the prompt
length counts only the tokens prefilled, not those the prefix cache served).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from services.replica.core.continuous import ContinuousPlanner
from services.replica.core.outputs import StepPlan, StepResult
from services.replica.core.scorpio.credit import CreditBatcher
from services.replica.core.scorpio.tpot_model import (
    DecodeTPOTModel,
    PrefillInterferenceTPOTModel,
    TPOTModel,
)
from services.replica.core.scorpio.ttft_guard import TTFTGuard, WaitingRequest
from services.replica.core.scorpio.vbs import Candidate, VBSAdmission
from services.replica.core.sequence import Sequence
from shared.domain import HardwareProfile
from shared.domain.engine import EngineConfig
from shared.domain.scorpio import ScorpioConfig

_EWMA = 0.05  # weight of each finished request in the measured mean lengths


class ScorpioPlanner(ContinuousPlanner):
    """The continuous planner with SCORPIO's guards; `config.scorpio` holds their knobs."""

    def __init__(self, config: EngineConfig, profiles: Mapping[str, HardwareProfile]) -> None:
        if config.scorpio is None:
            raise ValueError("ScorpioPlanner needs an EngineConfig with `scorpio` set")
        super().__init__(config, profiles)
        self.scorpio: ScorpioConfig = config.scorpio
        self.credits = CreditBatcher(self.scorpio.credit_epsilon)
        self.mean_input = float(self.scorpio.prior_input_tokens)
        self.mean_output = float(self.scorpio.prior_output_tokens)

    def update(self, plan: StepPlan) -> StepResult:
        result = super().update(plan)
        for seq in result.finished:
            prefilled = seq.request.input_tokens - seq.cached_prompt_tokens  # prefix cache hits
            self.mean_input += _EWMA * (prefilled - self.mean_input)
            self.mean_output += _EWMA * (seq.num_output_tokens - self.mean_output)
        return result

    def tpot_model(self) -> TPOTModel:
        profile = self.state.profile
        decode = DecodeTPOTModel(profile.decode)
        if not self.scorpio.prefill_interference:
            return decode
        p = profile.prefill
        prefill_s = p.time_s(1, self.mean_input) - p.p4  # the step's fixed cost is already paid
        return PrefillInterferenceTPOTModel(decode, prefill_s, self.mean_output)

    def stp_s(self, seq: Sequence) -> float:
        return seq.request.slo.tpot_target_s or self.scorpio.default_tpot_s

    # ---- TTFT guard
    def guard(self, plan: StepPlan, now_s: float) -> None:
        st = self.state
        if not self.scorpio.ttft_guard or st.model is None:
            return
        waiting = [s for s in st.waiting.sequences() if s.first_token_s is None]
        if not waiting:
            return
        profile = st.profile
        budget = self.config.max_num_batched_tokens
        decoding = [s for s in st.running if s.num_output_tokens > 0]
        ctx = sum(s.num_tokens for s in decoding) / len(decoding) if decoding else 0.0
        step_decode_s = profile.decode_time_s(ctx, len(decoding)) if decoding else 0.0

        def prefill_s(tokens: int) -> float:
            # its prefill chunks, each sharing a step with the running decodes
            return profile.prefill_time_s(1, tokens) + math.ceil(tokens / budget) * step_decode_s

        by_id = {s.request_id: s for s in waiting}
        items = [
            WaitingRequest(
                s.request_id,
                s.request.arrival_s,
                s.request.ttft_deadline_abs_s,
                s.uncomputed_tokens,
                s.request.slo.class_name,
            )
            for s in waiting
        ]
        for rej in TTFTGuard(prefill_s, self.scorpio.ttft_margin_s).check(items, now_s, now_s):
            st.reject_waiting(by_id[rej.request_id], rej.reason, plan)

    # ---- credit batching
    def decode_set(self, decoding: list[Sequence], now_s: float) -> list[Sequence]:
        if not self.scorpio.credit_batching:
            return decoding
        chosen = set(self.credits.select([(s.request_id, self.stp_s(s)) for s in decoding]))
        return [s for s in decoding if s.request_id in chosen]

    # ---- TPOT guard
    def may_admit(self, seq: Sequence, now_s: float) -> bool:
        if not self.scorpio.vbs_admission:
            return True
        vbs = VBSAdmission(
            self.tpot_model(),
            self.scorpio.tpot_safety_factor,
            self.scorpio.tpot_slo_margin,
        )
        running = [Candidate(self.stp_s(s), s.num_tokens) for s in self.state.running]
        if not running:
            return True  # an idle engine always takes its head (it would otherwise starve)
        if self.scorpio.vbs_untargeted_free and not any(
            s.request.slo.tpot_target_s for s in (*self.state.running, seq)
        ):
            return True  # no TPOT SLO to guard
        return vbs.decide(running, Candidate(self.stp_s(seq), seq.num_tokens)).admit
