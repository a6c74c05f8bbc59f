"""Continuous (iteration-level) batching with chunked prefill, after vLLM v1's Scheduler.schedule.

Each step: (0) if the policy allows, an urgent waiting head preempts lower-priority running work
for KV room; (1) running sequences in key order get their next tokens (1 for decode, a chunk for
prefill) within the token budget, preempting the highest-key running sequence when KV runs out;
(2) if nothing was preempted, waiting sequences in key order are admitted while budget, seats and
KV allow. A waiting head for another model blocks admission (head-of-line) and, once the instance
drains, triggers a model load.

Three hooks let SLO-aware planners (services/replica/core/scorpio_planner.py) change a step
without copying it: `guard` may reject waiting requests first, `decode_set` picks which decoding
sequences get a token this step (default: all), `may_admit` vetoes an admission (default: none).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from services.replica.core.outputs import ScheduledChunk, StepKind, StepPlan, StepResult
from services.replica.core.sequence import SeqStatus, Sequence

if TYPE_CHECKING:
    from services.replica.core.engine_core import SimEngineCore


class ContinuousPlanner:
    def plan(self, core: SimEngineCore, now_s: float) -> StepPlan:
        plan = StepPlan(kind=StepKind.EXECUTE, start_s=now_s)
        head = core.waiting.peek(now_s)
        if core.tiers.active is None or (
            not core.running and head is not None and head.model != core.tiers.active
        ):
            return core.load_plan(head.model, now_s) if head else StepPlan(StepKind.IDLE, now_s)
        self.guard(core, plan, now_s)
        if plan.rejected:
            head = core.waiting.peek(now_s)  # the guard may have turned the head away
        if core.policy.evict_for_waiting and head is not None:
            self._evict_for_head(core, head, plan, now_s)
        made_room = len(plan.preempted)
        budget = core.config.max_num_batched_tokens
        scheduled: set[int] = set()
        decoding = [s for s in core.running if _is_decode(s)]
        chosen = {id(s) for s in self.decode_set(core, decoding, now_s)}
        for seq in sorted(core.running, key=lambda s: s.key):
            if budget <= 0:
                break
            if seq.status is not SeqStatus.RUNNING:
                continue  # preempted earlier in this loop
            if _is_decode(seq) and id(seq) not in chosen:
                continue  # its decode sits this step out (credit batching)
            k = min(seq.uncomputed_tokens, budget)
            while not core.pool.can_hold(seq, seq.num_computed_tokens + k):
                # highest key loses; among ties the most recently admitted (vLLM pops running[-1])
                victims = [s for s in reversed(core.running) if id(s) not in scheduled]
                victim = max(victims, key=lambda s: core.policy.key(s, now_s))
                core.preempt(victim, plan, now_s)
                if victim is seq:
                    break
            if seq.status is not SeqStatus.RUNNING:
                continue
            core.pool.grow(seq, seq.num_computed_tokens + k)
            plan.chunks.append(ScheduledChunk(seq, k))
            scheduled.add(id(seq))
            budget -= k
        if len(plan.preempted) == made_room:  # vLLM: no admissions in a step that preempted
            self._admit(core, plan, budget, now_s)
        if not plan.chunks:
            plan.kind = StepKind.IDLE
            return plan
        plan.duration_s = self._duration(core, plan)
        return plan

    def _admit(self, core: SimEngineCore, plan: StepPlan, budget: int, now_s: float) -> None:
        cfg = core.config
        while budget > 0 and len(core.running) < cfg.max_num_seqs:
            seq = core.waiting.peek(now_s)
            if seq is None or seq.model != core.tiers.active:
                return
            k = min(seq.uncomputed_tokens, budget)
            if not core.pool.can_hold(seq, seq.num_computed_tokens + k):
                return
            if not self.may_admit(core, seq, now_s):
                return
            core.waiting.pop(now_s)
            core.swap_in(seq, plan)
            seq.status = SeqStatus.RUNNING
            core.running.append(seq)
            core.pool.grow(seq, seq.num_computed_tokens + k)
            plan.chunks.append(ScheduledChunk(seq, k))
            budget -= k

    # ---- hooks (defaults: vLLM's behaviour) ----------------------------------------------------
    def guard(self, core: SimEngineCore, plan: StepPlan, now_s: float) -> None:
        """Reject waiting requests before planning (via core.reject_waiting). Default: none."""

    def decode_set(
        self, core: SimEngineCore, decoding: list[Sequence], now_s: float
    ) -> list[Sequence]:
        """The decoding sequences that get a token this step. Default: all of them."""
        return decoding

    def may_admit(self, core: SimEngineCore, seq: Sequence, now_s: float) -> bool:
        """Whether the waiting head may join the running batch now. Default: yes."""
        return True

    def _evict_for_head(
        self, core: SimEngineCore, head: Sequence, plan: StepPlan, now_s: float
    ) -> None:
        """Preempt running sequences ranked below the head until the head's prefill fits."""
        if head.model != core.tiers.active:
            return
        need = min(head.uncomputed_tokens, core.config.max_num_batched_tokens)
        while core.running and not core.pool.can_hold(head, head.num_computed_tokens + need):
            victim = max(reversed(core.running), key=lambda s: core.policy.key(s, now_s))
            if core.policy.key(victim, now_s) <= head.key:
                return
            core.preempt(victim, plan, now_s)

    @staticmethod
    def _duration(core: SimEngineCore, plan: StepPlan) -> float:
        p_tokens = p_seqs = p_max = d_seqs = d_ctx = 0
        for ch in plan.chunks:
            seq = ch.seq
            ctx = seq.num_computed_tokens  # KV already cached before this step
            if ch.num_tokens == 1 and seq.num_output_tokens > 0:
                d_seqs += 1
                d_ctx += ctx + 1
            else:
                p_tokens += ch.num_tokens
                p_seqs += 1
                p_max = max(p_max, ctx + ch.num_tokens)
        return core.profile.step_time_s(p_tokens, p_seqs, p_max, d_seqs, d_ctx)

    def update(self, core: SimEngineCore, plan: StepPlan) -> StepResult:
        result = StepResult(end_s=plan.end_s)
        for ch in plan.chunks:
            seq = ch.seq
            if seq.status is not SeqStatus.RUNNING:
                continue  # aborted or evicted while the step ran
            core.commit_tokens(seq, ch.num_tokens)
            if seq.num_computed_tokens < seq.num_tokens:
                continue  # a partial prefill chunk samples nothing
            core.emit_token(seq, plan.end_s)
            result.emitted.append(seq)
            if seq.is_done:
                core.finish(seq, plan.end_s)
                result.finished.append(seq)
        return result


def _is_decode(seq: Sequence) -> bool:
    """A running sequence whose prompt is computed and that needs exactly its next token."""
    return seq.uncomputed_tokens == 1 and seq.num_output_tokens > 0
