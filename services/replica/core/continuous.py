"""Continuous (iteration-level) batching with chunked prefill, after vLLM v1's Scheduler.schedule.

Each step: (0) if the policy allows, an urgent waiting head preempts lower-priority running work
for KV room; (1) running sequences in key order get their next tokens (1 for decode, a chunk for
prefill) within the token budget, preempting the highest-key running sequence when KV runs out;
(2) if nothing was preempted, waiting sequences in key order are admitted while budget, seats and
KV allow. A waiting head for another model blocks admission (head-of-line) and, once the instance
drains, triggers a model load; a swap the scheduler decided (`state.swap_order`) loads its model
once the active model's running and head-of-queue requests are done. LoRA adapters follow vLLM's
max_loras rule: a batch runs at most `adapter_slots` distinct adapters, and a waiting request
whose adapter would be one too many is skipped for this step (it keeps its place; those behind
it may still be admitted). vLLM counts the adapters of the running requests scheduled in the
step; here every running request counts, so a decode that sits a step out (credit batching)
cannot come back to a batch over the limit.

Three hooks let SLO-aware planners (services/replica/core/scorpio_planner.py) change a step
without copying it: `guard` may reject waiting requests first, `decode_set` picks which decoding
sequences get a token this step (default: all), `may_admit` vetoes an admission (default: none).
"""

from __future__ import annotations

from services.replica.core.outputs import (
    MixedStep,
    ScheduledChunk,
    StepKind,
    StepPlan,
    StepResult,
)
from services.replica.core.planner import Planner
from services.replica.core.sequence import SeqStatus, Sequence


class ContinuousPlanner(Planner):
    def plan(self, now_s: float) -> StepPlan:
        st = self.state
        plan = StepPlan(kind=StepKind.EXECUTE, start_s=now_s)
        head = st.waiting.peek(now_s)
        if (target := st.swap_due(head)) is not None:
            return self.load_plan(target, now_s)
        if st.model is None or (not st.running and head is not None and head.model != st.model):
            return self.load_plan(head.model, now_s) if head else StepPlan(StepKind.IDLE, now_s)
        self.guard(plan, now_s)
        if plan.rejected:
            head = st.waiting.peek(now_s)  # the guard may have turned the head away
            if not st.running and head is not None and head.model != st.model:
                # the new head needs another model: load it now (an IDLE plan here would leave
                # the waiting work with no event to wake the engine again)
                load = self.load_plan(head.model, now_s)
                load.rejected = plan.rejected
                return load
        if st.policy.evict_for_waiting and head is not None:
            self._evict_for_head(head, plan, now_s)
        made_room = len(plan.preempted)
        budget = self.config.max_num_batched_tokens
        scheduled: set[int] = set()
        decoding = [s for s in st.running if _is_decode(s)]
        chosen = {id(s) for s in self.decode_set(decoding, now_s)}
        for seq in sorted(st.running, key=lambda s: s.key):
            if budget <= 0:
                break
            if seq.status is not SeqStatus.RUNNING:
                continue  # preempted earlier in this loop
            if _is_decode(seq) and id(seq) not in chosen:
                continue  # its decode sits this step out (credit batching)
            k = min(seq.uncomputed_tokens, budget)
            while not st.pool.can_hold(seq, seq.num_computed_tokens + k):
                # highest key loses; among ties the most recently admitted (vLLM pops running[-1])
                victims = [s for s in reversed(st.running) if id(s) not in scheduled]
                victim = max(victims, key=lambda s: st.policy.key(s, now_s))
                st.preempt(victim, plan, now_s)
                if victim is seq:
                    break
            if seq.status is not SeqStatus.RUNNING:
                continue
            st.pool.grow(seq, seq.num_computed_tokens + k)
            plan.chunks.append(ScheduledChunk(seq, k))
            scheduled.add(id(seq))
            budget -= k
        if len(plan.preempted) == made_room:  # vLLM: no admissions in a step that preempted
            self._admit(plan, budget, now_s)
        if not plan.chunks:
            plan.kind = StepKind.IDLE
            return plan
        plan.work = _work(plan)
        return plan

    def _admit(self, plan: StepPlan, budget: int, now_s: float) -> None:
        st = self.state
        adapters = {s.request.adapter for s in st.running if s.request.adapter is not None}
        skipped: list[Sequence] = []
        while budget > 0 and len(st.running) < self.config.max_num_seqs:
            seq = st.waiting.peek(now_s)
            if seq is None or seq.model != st.model:
                break
            adapter = seq.request.adapter
            if (
                adapter is not None
                and adapter not in adapters
                and len(adapters) >= self.config.adapter_slots
            ):
                skipped.append(st.waiting.take(now_s))  # one adapter too many: skip it
                continue
            k = min(seq.uncomputed_tokens, budget)
            if not st.pool.can_hold(seq, seq.num_computed_tokens + k):
                break
            if not self.may_admit(seq, now_s):
                break
            if adapter is not None:
                adapters.add(adapter)
            st.waiting.pop(now_s)
            st.swap_in(seq, plan)
            seq.status = SeqStatus.RUNNING
            st.running.append(seq)
            st.pool.grow(seq, seq.num_computed_tokens + k)
            plan.chunks.append(ScheduledChunk(seq, k))
            budget -= k
        for seq in skipped:
            st.waiting.restore(seq)

    # ---- hooks (defaults: vLLM's behaviour) ----------------------------------------------------
    def guard(self, plan: StepPlan, now_s: float) -> None:
        """Reject waiting requests before planning (via state.reject_waiting). Default: none."""

    def decode_set(self, decoding: list[Sequence], now_s: float) -> list[Sequence]:
        """The decoding sequences that get a token this step. Default: all of them."""
        return decoding

    def may_admit(self, seq: Sequence, now_s: float) -> bool:
        """Whether the waiting head may join the running batch now. Default: yes."""
        return True

    def _evict_for_head(self, head: Sequence, plan: StepPlan, now_s: float) -> None:
        """Preempt running sequences ranked below the head until the head's prefill fits."""
        st = self.state
        if head.model != st.model:
            return
        need = min(head.uncomputed_tokens, self.config.max_num_batched_tokens)
        while st.running and not st.pool.can_hold(head, head.num_computed_tokens + need):
            victim = max(reversed(st.running), key=lambda s: st.policy.key(s, now_s))
            if st.policy.key(victim, now_s) <= head.key:
                return
            st.preempt(victim, plan, now_s)

    def update(self, plan: StepPlan) -> StepResult:
        st = self.state
        result = StepResult(end_s=plan.end_s)
        for ch in plan.chunks:
            seq = ch.seq
            if seq.status is not SeqStatus.RUNNING:
                continue  # aborted or evicted while the step ran
            st.commit_tokens(seq, ch.num_tokens)
            if seq.num_computed_tokens < seq.num_tokens:
                continue  # a partial prefill chunk samples nothing
            if seq.num_output_tokens == 0:
                st.prompt_computed(seq)
            st.emit_token(seq, plan.end_s)
            result.emitted.append(seq)
            if seq.is_done:
                st.finish(seq, plan.end_s)
                result.finished.append(seq)
            elif seq.num_output_tokens >= (seq.slice_end_tokens or seq.target_output_tokens):
                st.leave_slice(seq)  # slice mode: back to the global pool (state.add_slice)
                result.sliced.append(seq)
        return result


def _work(plan: StepPlan) -> MixedStep:
    """The forward pass of the scheduled chunks: prefill chunks and decodes, with their contexts."""
    p_tokens = p_seqs = p_max = d_seqs = d_ctx = p_attn = 0
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
            p_attn += ch.num_tokens * (ctx + ch.num_tokens)
    return MixedStep(p_tokens, p_seqs, p_max, d_seqs, d_ctx, p_attn)


def _is_decode(seq: Sequence) -> bool:
    """A running sequence whose prompt is computed and that needs exactly its next token."""
    return seq.uncomputed_tokens == 1 and seq.num_output_tokens > 0
