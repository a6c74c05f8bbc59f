"""The requests and KV cache of one simulated engine, owned by its planner.

This is what vLLM v1 keeps inside its Scheduler rather than its EngineCore: the waiting queue
(ordered by the queue policy), the running list, the paged KV block pool of the active model and
the host swap space. On top of vLLM's it holds the requests taken out by QLM's eviction LSO
(QLM §5), the pre-formed batches of a static engine (SCLS §4, UELLM's SLO-ODBS) and the counters
the engine's status snapshot reports. Every lifecycle move of a request (queue, admit, preempt,
swap, finish, abort, evict, resume, slice end) is a method here, so the counters stay exact; the
planner that owns this state calls them while it plans and applies a step.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

from services.replica.core.kv_cache import BlockPool, HostSwapSpace
from services.replica.core.outputs import StepPlan
from services.replica.core.prefix_cache import PrefixCache
from services.replica.core.queue_policies import QUEUE_POLICIES
from services.replica.core.sequence import KVLocation, SeqStatus, Sequence
from services.replica.core.waiting_queue import WaitingQueue
from shared.domain import HardwareProfile, Request
from shared.domain.engine import EngineConfig, SliceEntry
from shared.domain.swap_order import SwapOrder


class SchedulerState:
    """Queues, KV pool and counters of one engine (one planner owns it; nothing else writes it).

    `model` is the model the KV pool is sized for: the engine's GPU-active model, set through
    `load_model` when the engine activates one (None: nothing loaded yet, a 1-block pool).
    """

    def __init__(self, config: EngineConfig, profiles: Mapping[str, HardwareProfile]) -> None:
        self.config = config
        self.profiles = profiles
        self.policy = QUEUE_POLICIES.create(config.queue_policy)
        self.waiting = WaitingQueue(self.policy)
        self.running: list[Sequence] = []
        self.evicted: dict[str, Sequence] = {}
        self.seqs: dict[str, Sequence] = {}
        self.batches: deque[tuple[list[Sequence], int]] = deque()
        """Pre-formed batches (static mode) with their decode iterations, served in order."""
        self.model: str | None = None
        self.swap_order = SwapOrder()
        """The model the scheduler decided to swap to (a ModelSwap; swap_order.py)."""
        self.pool = self._new_pool(None)
        self.prefix_cache: PrefixCache | None = None
        """Automatic prefix caching (continuous engines with prefix_caching on)."""
        self.host = HostSwapSpace(config.host_swap_bytes)
        self.pending_swap_out_tokens = 0
        self.preemptions = 0
        self.outstanding_out = 0
        """Σ remaining output tokens of live sequences."""
        self.uncomputed = 0
        """Σ uncomputed tokens of live sequences."""

    # ---- the model the KV pool serves ---------------------------------------------------------
    @property
    def profile(self) -> HardwareProfile:
        """The active model's profile (the planner's cost model for admission decisions)."""
        assert self.model is not None
        return self.profiles[self.model]

    def holds_gpu_kv(self) -> bool:
        return any(s.kv is KVLocation.GPU for s in self.running)

    def load_model(self, model: str) -> None:
        """A fresh KV pool sized for `model` (the engine checked that no GPU KV is held)."""
        self.model = model
        self.swap_order.done(model)
        self.pool = self._new_pool(model)
        if self.config.prefix_caching and self.config.mode == "continuous":
            self.prefix_cache = PrefixCache(self.pool.num_blocks)

    def swap_due(self, head: Sequence | None) -> str | None:
        """The model to load now (SwapOrder.due): the decided swap target once the active
        model's running requests have finished and none of its waiting ones heads the queue;
        None: no swap is due."""
        running = bool(self.running or self.batches)
        return self.swap_order.due(self.model, running, head.model if head else None)

    def _new_pool(self, model: str | None) -> BlockPool:
        bs = self.config.block_size_tokens
        if model is None:
            return BlockPool(1, bs)
        return BlockPool(max(1, self.profiles[model].kv_capacity_tokens // bs), bs)

    @property
    def has_work(self) -> bool:
        return (
            bool(self.running)
            or len(self.waiting) > 0
            or bool(self.batches)
            or self.swap_order.target is not None
        )

    def take_swapped_out_tokens(self) -> int:
        """Tokens swapped out since the last executed step (their transfer joins the next one)."""
        tokens, self.pending_swap_out_tokens = self.pending_swap_out_tokens, 0
        return tokens

    # ---- requests in and out ------------------------------------------------------------------
    def add(self, request: Request, now_s: float) -> Sequence:
        """Queue a new (validated) request."""
        seq = Sequence(request=request, enqueue_s=now_s)
        self.seqs[request.request_id] = seq
        if self.prefix_cache is not None:  # cached leading blocks count computed (no KV held yet)
            seq.num_computed_tokens = seq.cached_prompt_tokens = self.prefix_cache.lookup(request)
        self.outstanding_out += seq.target_output_tokens
        self.uncomputed += seq.uncomputed_tokens
        self.waiting.push(seq, now_s)
        return seq

    def add_batch(self, entries: list[SliceEntry], iterations: int, now_s: float) -> None:
        """Queue a (validated) pre-formed batch for one slice of `iterations` decode steps."""
        seqs = []
        for e in entries:
            seq = self.add(e.request, now_s)
            self.waiting.discard(seq)  # batches bypass the waiting queue
            seq.status = SeqStatus.BATCHED
            seq.num_output_tokens = e.output_tokens
            seq.first_token_s = e.first_token_s
            seq.preemptions = e.preemptions
            self.outstanding_out -= e.output_tokens
            self.uncomputed += e.output_tokens
            seqs.append(seq)
        self.batches.append((seqs, iterations))

    def add_slice(self, entries: list[SliceEntry], iterations: int, now_s: float) -> None:
        """Continuous engines in slice mode (SCLS for continuous batching, as the live mesh
        serves it): each member joins the waiting queue with its context (prompt + the tokens of
        earlier slices, prefilled again) and leaves once it produced `iterations` more tokens."""
        for e in entries:
            seq = self.add(e.request, now_s)
            seq.num_output_tokens = e.output_tokens
            seq.first_token_s = e.first_token_s
            seq.preemptions = e.preemptions
            seq.slice_end_tokens = e.output_tokens + iterations
            self.outstanding_out -= e.output_tokens
            self.uncomputed += e.output_tokens

    def abort(self, request_id: str) -> bool:
        """Stop a request wherever it is and free its KV. False if unknown or already done."""
        seq = self.seqs.get(request_id)
        if seq is None or seq.status in (SeqStatus.FINISHED, SeqStatus.ABORTED):
            return False
        self.outstanding_out -= seq.remaining_output_tokens
        self.uncomputed -= seq.uncomputed_tokens
        self._drop_kv(seq)
        self._leave(seq)
        seq.status = SeqStatus.ABORTED
        del self.seqs[request_id]
        return True

    def reject_waiting(self, seq: Sequence, reason: str, plan: StepPlan) -> None:
        """Turn a waiting request away (an admission guard decided it cannot meet its SLO)."""
        self.outstanding_out -= seq.remaining_output_tokens
        self.uncomputed -= seq.uncomputed_tokens
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

    # ---- moves made while planning and applying a step ---------------------------------------
    def commit_tokens(self, seq: Sequence, num_tokens: int) -> None:
        """`num_tokens` of `seq` were computed by a finished step; their KV is on the GPU."""
        seq.num_computed_tokens += num_tokens
        seq.kv = KVLocation.GPU
        self.uncomputed -= num_tokens

    def prompt_computed(self, seq: Sequence) -> None:
        """`seq`'s prompt KV is complete (its first token is due): cache its prompt blocks."""
        if self.prefix_cache is not None:
            self.prefix_cache.insert(seq.request)

    def emit_token(self, seq: Sequence, now_s: float) -> None:
        seq.num_output_tokens += 1
        self.outstanding_out -= 1
        self.uncomputed += 1
        if seq.first_token_s is None:
            seq.first_token_s = now_s

    def finish(self, seq: Sequence, now_s: float) -> None:
        if self.prefix_cache is not None:
            self.prefix_cache.insert(seq.request, finished=True)
        self.uncomputed -= seq.uncomputed_tokens
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

    def leave_slice(self, seq: Sequence) -> None:
        """An unfinished member of a pre-formed batch leaves the engine at its slice end."""
        self.outstanding_out -= seq.remaining_output_tokens
        self.uncomputed -= seq.uncomputed_tokens
        self.running.remove(seq)
        self.pool.release(seq)
        seq.kv = KVLocation.NONE
        seq.status = SeqStatus.ABORTED
        del self.seqs[seq.request_id]

    def drop_computed(self, seq: Sequence) -> None:
        """Forget `seq`'s KV: its prompt and generated tokens must be prefilled again."""
        self.uncomputed += seq.num_computed_tokens
        seq.num_computed_tokens = 0
        seq.kv = KVLocation.NONE

    def swap_in(self, seq: Sequence, plan: StepPlan) -> None:
        """Bring a swapped-out sequence's KV back from the host (its GPU blocks are grown later)."""
        if seq.kv is KVLocation.CPU:
            self.host.release(self._kv_bytes(seq, seq.cpu_tokens))
            plan.swapped_in_tokens += seq.cpu_tokens
            seq.cpu_tokens = 0
        seq.kv = KVLocation.GPU

    # ---- KV bookkeeping -------------------------------------------------------------------------
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

    def _should_swap(self, seq: Sequence) -> bool:
        mode = self.config.preemption_mode
        tokens = seq.num_computed_tokens
        if mode == "recompute" or tokens == 0:
            return False
        if not self.host.can_hold(self._kv_bytes(seq, tokens)):
            return False
        if mode == "swap":
            return True
        prof = self.profiles[seq.model]  # auto: swap out + in vs. re-prefill
        return 2 * prof.swap_time_s(tokens) < prof.prefill_time_s(1, tokens)

    def _kv_bytes(self, seq: Sequence, tokens: int) -> int:
        return tokens * self.profiles[seq.model].kv_bytes_per_token

    def _drop_kv(self, seq: Sequence) -> None:
        if seq.kv is KVLocation.CPU:
            self.host.release(self._kv_bytes(seq, seq.cpu_tokens))
            seq.cpu_tokens = 0
        if seq.gpu_blocks:
            self.pool.release(seq)
        seq.kv = KVLocation.NONE

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
