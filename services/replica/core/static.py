"""Static batching (HuggingFace-style, the SLS baseline and SCLS slices).

Pre-formed batches (SimEngineCore.add_batch: SCLS DP batching, UELLM SLO-ODBS) run first, as
formed, for their given number of iterations; their unfinished members then leave the engine
(`sliced`) for the global pool. Otherwise a batch of up to `static_batch_size` requests is padded
to its longest context and runs prefill, then decode iterations for every slot (finished ones
still occupy their padded slot) until all are done or `static_iteration_limit` iterations pass.
Results return when the batch ends; unfinished requests go back to the queue and re-prefill their
context in a later batch (a new slice).
Memory is reserved for the worst case N·(L_pad + limit) at batch start. The plan's work is the
padded shape (PaddedPrefill, PaddedDecode), which the engine core times.
"""

from __future__ import annotations

from collections.abc import Mapping

from services.replica.core.kv_cache import blocks_for
from services.replica.core.outputs import (
    PaddedDecode,
    PaddedPrefill,
    ScheduledChunk,
    StepKind,
    StepPlan,
    StepResult,
)
from services.replica.core.planner import Planner
from services.replica.core.sequence import SeqStatus, Sequence
from shared.domain import HardwareProfile
from shared.domain.engine import EngineConfig


class StaticPlanner(Planner):
    def __init__(self, config: EngineConfig, profiles: Mapping[str, HardwareProfile]) -> None:
        super().__init__(config, profiles)
        self.batch: list[Sequence] = []
        self.padded_len = 0
        self.iterations = 0
        self.limit = 0
        self.preformed = False

    def plan(self, now_s: float) -> StepPlan:
        st = self.state
        self.batch = [s for s in self.batch if s.status is SeqStatus.RUNNING]
        if not self.batch and st.batches:
            return self._start_preformed(now_s)
        if not self.batch:
            head = st.waiting.peek(now_s)
            if (target := st.swap_due(head)) is not None:
                return self.load_plan(target, now_s)
            if head is None:
                return StepPlan(StepKind.IDLE, now_s)
            if head.model != st.model:
                return self.load_plan(head.model, now_s)
            return self._start_batch(now_s)
        plan = StepPlan(kind=StepKind.EXECUTE, start_s=now_s)
        n = len(self.batch)
        plan.chunks = [ScheduledChunk(s, 1) for s in self.batch if not s.is_done]
        plan.work = PaddedDecode(self.padded_len + self.iterations, n)
        return plan

    def _start_preformed(self, now_s: float) -> StepPlan:
        st = self.state
        batch, limit = st.batches.popleft()
        model = batch[0].model
        if model != st.model:
            st.batches.appendleft((batch, limit))
            return self.load_plan(model, now_s)
        plan = StepPlan(kind=StepKind.EXECUTE, start_s=now_s)
        pad = max(s.num_tokens for s in batch)
        pool = st.pool
        per_seq = min(blocks_for(pad + limit, pool.block_size), pool.num_blocks // len(batch))
        for seq in batch:
            st.drop_computed(seq)
            seq.status = SeqStatus.RUNNING
            st.running.append(seq)
            pool.grow(seq, per_seq * pool.block_size)
        self.batch, self.padded_len, self.limit, self.iterations = batch, pad, limit, 0
        self.preformed = True
        plan.chunks = [ScheduledChunk(s, s.num_tokens) for s in batch]
        plan.work = PaddedPrefill(len(batch), pad)
        return plan

    def _start_batch(self, now_s: float) -> StepPlan:
        st, cfg = self.state, self.config
        plan = StepPlan(kind=StepKind.EXECUTE, start_s=now_s)
        pool = st.pool
        batch: list[Sequence] = []
        pad = limit = 0
        while len(batch) < cfg.static_batch_size:
            seq = st.waiting.peek(now_s)
            if seq is None or seq.model != st.model:
                break
            new_pad = max(pad, seq.num_tokens)
            new_limit = cfg.static_iteration_limit or max(limit, seq.remaining_output_tokens)
            worst = blocks_for(new_pad + new_limit, pool.block_size)
            if batch and (len(batch) + 1) * worst > pool.num_blocks:
                break  # the worst-case padded batch would not fit in KV memory
            st.waiting.pop(now_s)
            st.swap_in(seq, plan)
            st.drop_computed(seq)  # static engines keep no KV across batches
            seq.status = SeqStatus.RUNNING
            st.running.append(seq)
            batch.append(seq)
            pad, limit = new_pad, new_limit
        per_seq = min(blocks_for(pad + limit, pool.block_size), pool.num_blocks // len(batch))
        for seq in batch:
            pool.grow(seq, per_seq * pool.block_size)
        self.batch, self.padded_len, self.limit, self.iterations = batch, pad, limit, 0
        self.preformed = False
        plan.chunks = [ScheduledChunk(s, s.num_tokens) for s in batch]
        plan.work = PaddedPrefill(len(batch), pad)
        return plan

    def update(self, plan: StepPlan) -> StepResult:
        st = self.state
        result = StepResult(end_s=plan.end_s)
        for ch in plan.chunks:
            seq = ch.seq
            if seq.status is not SeqStatus.RUNNING:
                continue
            st.commit_tokens(seq, ch.num_tokens)
            st.emit_token(seq, plan.end_s)
            result.emitted.append(seq)
        self.iterations += 1
        live = [s for s in self.batch if s.status is SeqStatus.RUNNING]
        if self.iterations >= self.limit or all(s.is_done for s in live):
            for seq in live:
                if seq.is_done:
                    st.finish(seq, plan.end_s)
                    result.finished.append(seq)
                elif self.preformed:
                    st.leave_slice(seq)
                    result.sliced.append(seq)
                else:
                    st.requeue_slice(seq, plan.end_s)
            self.batch = []
        return result
