"""The simulated engine core: one instance, stepped by its caller (`schedule` then `update`).

The caller owns time: the discrete-event simulator calls `update(plan)` at `plan.end_s` on a
virtual clock; the live shell sleeps `plan.duration_s` on the wall clock. Step durations come from
the HardwareProfile of the active model. Batching is delegated to a planner (continuous or static).
"""

from __future__ import annotations

from collections import deque

from services.replica.core.kv_cache import BlockPool, HostSwapSpace
from services.replica.core.model_tiers import ModelTiers
from services.replica.core.outputs import StepKind, StepPlan, StepResult
from services.replica.core.planners import make_planner
from services.replica.core.queue_policies import QUEUE_POLICIES
from services.replica.core.sequence import KVLocation, SeqStatus, Sequence
from services.replica.core.waiting_queue import WaitingQueue
from shared.domain import HardwareProfile, Request
from shared.domain.engine import EngineConfig, EngineStatus, RequestTooLarge, SliceEntry


class SimEngineCore:
    def __init__(
        self,
        name: str,
        profiles: dict[str, HardwareProfile],
        config: EngineConfig,
        active_model: str | None = None,
    ) -> None:
        if not profiles:
            raise ValueError(f"instance {name}: needs at least one model profile")
        self.name = name
        self.config = config
        self.policy = QUEUE_POLICIES.create(config.queue_policy)
        self.tiers = ModelTiers(profiles, config.host_model_cache_bytes, active_model)
        self.pool = self._new_pool(active_model)
        self.host = HostSwapSpace(config.host_swap_bytes)
        self.waiting = WaitingQueue(self.policy)
        self.running: list[Sequence] = []
        self.evicted: dict[str, Sequence] = {}
        self.seqs: dict[str, Sequence] = {}
        self.batches: deque[tuple[list[Sequence], int]] = deque()
        """Pre-formed batches (static mode) with their decode iterations, served in order."""
        self.pending_swap_out_tokens = 0
        self.preemptions = 0
        self.model_swaps = 0
        self.busy_s = 0.0
        self.kv_block_seconds = 0.0
        self._outstanding_out = 0  # Σ remaining output tokens of live sequences
        self._uncomputed = 0  # Σ uncomputed tokens of live sequences
        self.planner = make_planner(config)

    # ---- requests in and out -------------------------------------------------------------
    def add_request(self, request: Request, now_s: float) -> Sequence:
        if request.request_id in self.seqs:
            raise ValueError(f"request_id '{request.request_id}' already in engine {self.name}")
        if request.model not in self.tiers.profiles:
            raise ValueError(f"instance {self.name} cannot serve model '{request.model}'")
        self.check_fits(request)
        seq = Sequence(request=request, enqueue_s=now_s)
        self.seqs[request.request_id] = seq
        self._outstanding_out += seq.target_output_tokens
        self._uncomputed += seq.uncomputed_tokens
        self.waiting.push(seq, now_s)
        return seq

    def check_fits(self, request: Request) -> None:
        """RequestTooLarge if prompt + max_tokens can never fit this instance's KV cache."""
        bs = self.config.block_size_tokens
        cap = self.tiers.profiles[request.model].kv_capacity_tokens // bs * bs  # whole blocks
        if request.input_tokens + request.max_tokens > cap:
            raise RequestTooLarge(
                f"input_tokens + max_tokens = {request.input_tokens + request.max_tokens} exceeds "
                f"the KV capacity of instance {self.name} for {request.model} ({cap} tokens)"
            )

    def add_batch(self, entries: list[SliceEntry], iterations: int, now_s: float) -> None:
        """Queue a pre-formed batch for one slice of `iterations` decode steps (static mode).

        Members that finish are returned as finished; the others leave the engine at the end of
        the slice (StepResult.sliced) for the global pool to batch again.
        """
        if self.config.mode != "static":
            raise ValueError(f"instance {self.name}: add_batch needs a static-mode engine")
        if not entries or iterations < 1:
            raise ValueError("add_batch: entries must be non-empty and iterations >= 1")
        ids = [e.request.request_id for e in entries]
        for e in entries:  # all or nothing: validate every member before adding any
            if e.request.request_id in self.seqs or ids.count(e.request.request_id) > 1:
                raise ValueError(
                    f"request_id '{e.request.request_id}' already in engine {self.name}"
                )
            if e.request.model not in self.tiers.profiles:
                raise ValueError(f"instance {self.name} cannot serve model '{e.request.model}'")
            self.check_fits(e.request)
        seqs = []
        for e in entries:
            seq = self.add_request(e.request, now_s)
            self.waiting.discard(seq)  # batches bypass the waiting queue
            seq.status = SeqStatus.BATCHED
            seq.num_output_tokens = e.output_tokens
            seq.first_token_s = e.first_token_s
            seq.preemptions = e.preemptions
            self._outstanding_out -= e.output_tokens
            self._uncomputed += e.output_tokens
            seqs.append(seq)
        self.batches.append((seqs, iterations))

    def leave_slice(self, seq: Sequence) -> None:
        """An unfinished member of a pre-formed batch leaves the engine at its slice end."""
        self._outstanding_out -= seq.remaining_output_tokens
        self._uncomputed -= seq.uncomputed_tokens
        self.running.remove(seq)
        self.pool.release(seq)
        seq.kv = KVLocation.NONE
        seq.status = SeqStatus.ABORTED
        del self.seqs[seq.request_id]

    def abort(self, request_id: str) -> bool:
        """Stop a request wherever it is and free its KV. False if unknown or already done."""
        seq = self.seqs.get(request_id)
        if seq is None or seq.status in (SeqStatus.FINISHED, SeqStatus.ABORTED):
            return False
        self._outstanding_out -= seq.remaining_output_tokens
        self._uncomputed -= seq.uncomputed_tokens
        self._drop_kv(seq)
        self._leave(seq)
        seq.status = SeqStatus.ABORTED
        del self.seqs[request_id]
        return True

    def reject_waiting(self, seq: Sequence, reason: str, plan: StepPlan) -> None:
        """Turn a waiting request away (an admission guard decided it cannot meet its SLO)."""
        self._outstanding_out -= seq.remaining_output_tokens
        self._uncomputed -= seq.uncomputed_tokens
        self._drop_kv(seq)
        self.waiting.discard(seq)
        seq.status = SeqStatus.ABORTED
        del self.seqs[seq.request_id]
        plan.rejected.append((seq, reason))

    def evict(self, request_ids: list[str]) -> list[str]:
        """Take running/waiting requests out of service until `resume` (QLM's eviction LSO)."""
        done: list[str] = []
        for rid in request_ids:
            seq = self.seqs.get(rid)
            if seq is None or seq.status not in (SeqStatus.RUNNING, SeqStatus.WAITING):
                continue
            if seq.is_done:
                continue  # generation complete (a static batch holds it until the batch ends)
            if seq.status is SeqStatus.RUNNING:
                self._release_running(seq)
            else:
                self.waiting.discard(seq)
            seq.status = SeqStatus.EVICTED
            seq.preemptions += 1
            self.preemptions += 1
            self.evicted[rid] = seq
            done.append(rid)
        return done

    def resume(self, request_ids: list[str], now_s: float) -> list[str]:
        done = []
        for rid in request_ids:
            seq = self.evicted.pop(rid, None)
            if seq is not None:
                self.waiting.push(seq, now_s)
                done.append(rid)
        return done

    # ---- stepping ---------------------------------------------------------------------------
    @property
    def has_work(self) -> bool:
        return bool(self.running) or len(self.waiting) > 0 or bool(self.batches)

    def schedule(self, now_s: float) -> StepPlan:
        plan = self.planner.plan(self, now_s)
        if plan.kind is StepKind.EXECUTE:
            out_tokens, self.pending_swap_out_tokens = self.pending_swap_out_tokens, 0
            plan.swapped_out_tokens += out_tokens
            swap_tokens = plan.swapped_in_tokens + plan.swapped_out_tokens
            if swap_tokens and self.tiers.active is not None:
                plan.duration_s += self.profile.swap_time_s(swap_tokens)
        plan.kv_used_fraction = self.pool.used / self.pool.num_blocks
        self.busy_s += plan.duration_s
        self.kv_block_seconds += plan.kv_used_fraction * plan.duration_s
        return plan

    def update(self, plan: StepPlan) -> StepResult:
        if plan.kind is StepKind.LOAD_MODEL:
            assert plan.load_model is not None
            self.activate_model(plan.load_model)
            return StepResult(end_s=plan.end_s)
        return self.planner.update(self, plan)

    # ---- helpers used by the planners -------------------------------------------------------
    @property
    def profile(self) -> HardwareProfile:
        assert self.tiers.active is not None
        return self.tiers.profiles[self.tiers.active]

    def activate_model(self, model: str) -> None:
        if any(s.kv is KVLocation.GPU for s in self.running):
            raise RuntimeError(f"instance {self.name}: model swap while requests hold GPU KV")
        self.tiers.activate(model)
        self.pool = self._new_pool(model)
        self.model_swaps += 1

    def load_plan(self, model: str, now_s: float) -> StepPlan:
        return StepPlan(
            kind=StepKind.LOAD_MODEL,
            start_s=now_s,
            duration_s=self.tiers.load_time_s(model),
            load_model=model,
        )

    def commit_tokens(self, seq: Sequence, num_tokens: int) -> None:
        """`num_tokens` of `seq` were computed by a finished step; their KV is on the GPU."""
        seq.num_computed_tokens += num_tokens
        seq.kv = KVLocation.GPU
        self._uncomputed -= num_tokens

    def emit_token(self, seq: Sequence, now_s: float) -> None:
        seq.num_output_tokens += 1
        self._outstanding_out -= 1
        self._uncomputed += 1
        if seq.first_token_s is None:
            seq.first_token_s = now_s

    def finish(self, seq: Sequence, now_s: float) -> None:
        self._uncomputed -= seq.uncomputed_tokens
        self.running.remove(seq)
        self.pool.release(seq)
        seq.kv = KVLocation.NONE
        seq.status = SeqStatus.FINISHED
        seq.finish_s = now_s
        del self.seqs[seq.request_id]

    def preempt(self, seq: Sequence, plan: StepPlan, now_s: float) -> None:
        """Preempt a running sequence back to the waiting queue (recompute or swap)."""
        self._release_running(seq)
        seq.preemptions += 1
        self.preemptions += 1
        plan.preempted.append(seq.request_id)
        self.waiting.push(seq, now_s)

    def requeue_slice(self, seq: Sequence, now_s: float) -> None:
        """Static batching: an unfinished request leaves its batch and waits for the next slice."""
        self._release_running(seq, keep=False)
        self.waiting.push(seq, now_s)

    def _release_running(self, seq: Sequence, keep: bool = True) -> None:
        """Take `seq` off the GPU. keep=True: keep its KV on the host if that is the choice."""
        self.running.remove(seq)
        if keep and self._should_swap(seq):
            seq.cpu_tokens = seq.num_computed_tokens
            self.host.hold(self._kv_bytes(seq, seq.cpu_tokens))
            self.pending_swap_out_tokens += seq.cpu_tokens
            seq.kv = KVLocation.CPU
        else:
            self.drop_computed(seq)
        self.pool.release(seq)

    def drop_computed(self, seq: Sequence) -> None:
        """Forget `seq`'s KV: its prompt and generated tokens must be prefilled again."""
        self._uncomputed += seq.num_computed_tokens
        seq.num_computed_tokens = 0
        seq.kv = KVLocation.NONE

    def _should_swap(self, seq: Sequence) -> bool:
        mode = self.config.preemption_mode
        tokens = seq.num_computed_tokens
        if mode == "recompute" or tokens == 0:
            return False
        if not self.host.can_hold(self._kv_bytes(seq, tokens)):
            return False
        if mode == "swap":
            return True
        prof = self.tiers.profiles[seq.model]  # auto: swap out + in vs. re-prefill
        return 2 * prof.swap_time_s(tokens) < prof.prefill_time_s(1, tokens)

    def _kv_bytes(self, seq: Sequence, tokens: int) -> int:
        return tokens * self.tiers.profiles[seq.model].kv_bytes_per_token

    def _drop_kv(self, seq: Sequence) -> None:
        if seq.kv is KVLocation.CPU:
            self.host.release(self._kv_bytes(seq, seq.cpu_tokens))
            seq.cpu_tokens = 0
        if seq.gpu_blocks:
            self.pool.release(seq)
        seq.kv = KVLocation.NONE

    def swap_in(self, seq: Sequence, plan: StepPlan) -> None:
        """Bring a swapped-out sequence's KV back from the host (its GPU blocks are grown later)."""
        if seq.kv is KVLocation.CPU:
            self.host.release(self._kv_bytes(seq, seq.cpu_tokens))
            plan.swapped_in_tokens += seq.cpu_tokens
            seq.cpu_tokens = 0
        seq.kv = KVLocation.GPU

    def _leave(self, seq: Sequence) -> None:
        if seq.status is SeqStatus.RUNNING:
            self.running.remove(seq)
        elif seq.status is SeqStatus.WAITING:
            self.waiting.discard(seq)
        elif seq.status is SeqStatus.EVICTED:
            self.evicted.pop(seq.request_id, None)
        elif seq.status is SeqStatus.BATCHED:
            for members, _ in self.batches:
                if seq in members:
                    members.remove(seq)
            self.batches = deque(b for b in self.batches if b[0])

    def _new_pool(self, model: str | None) -> BlockPool:
        bs = self.config.block_size_tokens
        if model is None:
            return BlockPool(1, bs)
        return BlockPool(max(1, self.tiers.profiles[model].kv_capacity_tokens // bs), bs)

    def status(self) -> EngineStatus:
        return EngineStatus(
            active_model=self.tiers.active,
            waiting=len(self.waiting) + sum(len(b) for b, _ in self.batches),
            running=len(self.running),
            evicted=len(self.evicted),
            kv_used_blocks=self.pool.used,
            kv_total_blocks=self.pool.num_blocks,
            outstanding_output_tokens=self._outstanding_out,
            pending_prefill_tokens=self._uncomputed,
        )
