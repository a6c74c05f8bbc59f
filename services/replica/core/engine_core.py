"""The simulated engine core: one instance, stepped by its caller (`schedule` then `update`).

Shaped after vLLM v1's EngineCore, which steps the Scheduler it holds and runs the model: this
core is handed a planner (services/replica/core/planner.py; planner_factory.make_planner builds
the one an EngineConfig asks for) and never builds one. The planner owns the requests, queues and
KV cache and returns a data-only StepPlan; the core keeps what belongs to the instance:
- the model tiers (QLM §5 model swapping): which model is GPU-active, loading another one;
- step timing: the plan's forward pass (`plan.work`), KV swap transfers and model loads are timed
  on the HardwareProfile of the active model;
- accounting: busy seconds, KV-occupancy seconds, model swaps;
- validation of incoming requests against the instance's models and KV capacity.

The caller owns time: the discrete-event simulator calls `update(plan)` at `plan.end_s` on a
virtual clock; the live shell sleeps `plan.duration_s` on the wall clock.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from services.replica.core.model_tiers import ModelTiers
from services.replica.core.outputs import (
    MixedStep,
    PaddedDecode,
    PaddedPrefill,
    StepKind,
    StepPlan,
    StepResult,
    StepWork,
)
from services.replica.core.planner import Planner
from services.replica.core.scheduler_state import SchedulerState
from services.replica.core.sequence import Sequence
from shared.domain import HardwareProfile, Request
from shared.domain.engine import EngineConfig, EngineStatus, RequestTooLarge, SliceEntry


class SimEngineCore:
    def __init__(
        self,
        name: str,
        profiles: dict[str, HardwareProfile],
        config: EngineConfig,
        planner: Planner,
        active_model: str | None = None,
    ) -> None:
        if not profiles:
            raise ValueError(f"instance {name}: needs at least one model profile")
        if planner.config != config or set(planner.state.profiles) != set(profiles):
            raise ValueError(f"instance {name}: the planner was made for another config or models")
        self.name = name
        self.config = config
        self.planner = planner
        self.tiers = ModelTiers(profiles, config.host_model_cache_bytes, active_model)
        if active_model is not None:
            planner.state.load_model(active_model)
        self.model_swaps = 0
        self.loading: str | None = None
        """The model a LOAD_MODEL step now running loads (None: none runs)."""
        self.adapters: OrderedDict[str, None] = OrderedDict()
        """LoRA adapters held, least recently used first (at most config.adapter_slots)."""
        self.adapter_loads = 0
        self._adapter_stall_s = 0.0
        self.busy_s = 0.0
        self.kv_block_seconds = 0.0

    @property
    def _state(self) -> SchedulerState:
        return self.planner.state

    # ---- requests in and out -------------------------------------------------------------
    def add_request(self, request: Request, now_s: float) -> Sequence:
        if request.request_id in self._state.seqs:
            raise ValueError(f"request_id '{request.request_id}' already in engine {self.name}")
        if request.model not in self.tiers.profiles:
            raise ValueError(f"instance {self.name} cannot serve model '{request.model}'")
        self.check_fits(request)
        return self._state.add(request, now_s)

    def load_adapter(self, adapter: str) -> None:
        """Hold `adapter` (most recently used): loading one not held stalls the next step by
        config.adapter_load_s and unloads the least recently used beyond the slots. Each step
        holds the adapters of its running requests (at most the slots: the planner admits no
        more, continuous.py), so an adapter loads when a request first runs with it; the
        scheduler may load one ahead (an adapter-load decision)."""
        if adapter in self.adapters:
            self.adapters.move_to_end(adapter)
            return
        self.adapters[adapter] = None
        self.adapter_loads += 1
        self._adapter_stall_s += self.config.adapter_load_s
        while len(self.adapters) > self.config.adapter_slots:
            self.adapters.popitem(last=False)

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
        """Queue a pre-formed batch for one slice of `iterations` decode steps.

        Members that finish are returned as finished; the others leave the engine at the end of
        the slice (StepResult.sliced) for the global pool to batch again. A static engine runs
        the batch as one padded unit; a continuous engine admits the members through its
        waiting queue and each leaves after `iterations` tokens (SchedulerState.add_slice).
        """
        if not entries or iterations < 1:
            raise ValueError("add_batch: entries must be non-empty and iterations >= 1")
        ids = [e.request.request_id for e in entries]
        for e in entries:  # all or nothing: validate every member before adding any
            if e.request.request_id in self._state.seqs or ids.count(e.request.request_id) > 1:
                raise ValueError(
                    f"request_id '{e.request.request_id}' already in engine {self.name}"
                )
            if e.request.model not in self.tiers.profiles:
                raise ValueError(f"instance {self.name} cannot serve model '{e.request.model}'")
            self.check_fits(e.request)
        if self.config.mode == "static":
            self._state.add_batch(entries, iterations, now_s)
        else:
            self._state.add_slice(entries, iterations, now_s)

    def abort(self, request_id: str) -> bool:
        """Stop a request wherever it is and free its KV. False if unknown or already done."""
        return self._state.abort(request_id)

    def evict(self, request_ids: list[str]) -> list[str]:
        """Take running/waiting requests out of service until `resume` (QLM's eviction LSO)."""
        return self._state.evict(request_ids)

    def resume(self, request_ids: list[str], now_s: float) -> list[str]:
        return self._state.resume(request_ids, now_s)

    def sequence(self, request_id: str) -> Sequence | None:
        """The live sequence of `request_id` (None once finished, aborted or never added)."""
        return self._state.seqs.get(request_id)

    def sequences(self) -> list[Sequence]:
        """Every live sequence: waiting, running, batched or evicted."""
        return list(self._state.seqs.values())

    # ---- stepping ---------------------------------------------------------------------------
    @property
    def has_work(self) -> bool:
        return self._state.has_work

    @property
    def preemptions(self) -> int:
        """Preemptions and evictions so far (each sends a running or waiting request back)."""
        return self._state.preemptions

    def schedule(self, now_s: float) -> StepPlan:
        """The planner's next step, timed on the active model's profile."""
        plan = self.planner.schedule(now_s)
        if plan.kind is StepKind.LOAD_MODEL:
            assert plan.load_model is not None
            plan.duration_s = self.tiers.load_time_s(plan.load_model)
            self.loading = plan.load_model
        elif plan.kind is StepKind.EXECUTE:
            assert plan.work is not None
            running = (s.request.adapter for s in self._state.running)
            for adapter in dict.fromkeys(a for a in running if a is not None):
                self.load_adapter(adapter)
            plan.duration_s = step_time_s(self.profile, plan.work) + self._adapter_stall_s
            self._adapter_stall_s = 0.0
            swap_tokens = plan.swapped_in_tokens + plan.swapped_out_tokens
            if swap_tokens and self.tiers.active is not None:
                plan.duration_s += self.profile.swap_time_s(swap_tokens)
        self.busy_s += plan.duration_s
        self.kv_block_seconds += plan.kv_used_fraction * plan.duration_s
        return plan

    def update(self, plan: StepPlan) -> StepResult:
        if plan.kind is StepKind.LOAD_MODEL:
            assert plan.load_model is not None
            self.loading = None
            self.activate_model(plan.load_model)
            return StepResult(end_s=plan.end_s)
        return self.planner.update(plan)

    # ---- the instance's models ----------------------------------------------------------------
    @property
    def profile(self) -> HardwareProfile:
        assert self.tiers.active is not None
        return self.tiers.profiles[self.tiers.active]

    def swap_to(self, model: str) -> None:
        """The scheduler's swap (a ModelSwap `load`): make `model` active once the requests of
        the active model placed before it are done (SchedulerState.swap_due)."""
        if model not in self.tiers.profiles:
            raise ValueError(f"instance {self.name} cannot serve model '{model}'")
        self._state.swap_order.order(model, self.tiers.active)

    def activate_model(self, model: str) -> None:
        if self._state.holds_gpu_kv():
            raise RuntimeError(f"instance {self.name}: model swap while requests hold GPU KV")
        self.tiers.activate(model)
        self._state.load_model(model)
        self.model_swaps += 1

    def status(self) -> EngineStatus:
        st = self._state
        ordered = st.policy.deadline_ordered
        listed = ordered and self.config.report_waiting_prefill
        return EngineStatus(  # while a model loads, it is the one a request placed now is next on
            active_model=self.loading or self.tiers.active,
            waiting=len(st.waiting) + sum(len(b) for b, _ in st.batches),
            running=len(st.running),
            evicted=len(st.evicted),
            kv_used_blocks=st.pool.used,
            kv_total_blocks=st.pool.num_blocks,
            outstanding_output_tokens=st.outstanding_out,
            pending_prefill_tokens=st.uncomputed,
            waiting_prefill=waiting_prefill(st.waiting.sequences()) if listed else (),
            deadline_ordered=ordered,
            loaded_adapters=tuple(self.adapters),
            swapping=self.loading is not None,
        )


def waiting_prefill(waiting: Iterable[Sequence]) -> tuple[tuple[float, int], ...]:
    """(TTFT deadline, tokens not yet computed) of each waiting sequence."""
    return tuple((s.request.ttft_deadline_abs_s, s.uncomputed_tokens) for s in waiting)


def step_time_s(profile: HardwareProfile, work: StepWork) -> float:
    """Duration of one forward pass on `profile` (the bilinear step model, SCLS §4.2–4.3)."""
    match work:
        case MixedStep():
            return profile.step_time_s(
                work.prefill_tokens,
                work.prefill_seqs,
                work.prefill_max_ctx,
                work.decode_seqs,
                work.decode_ctx,
                work.prefill_attention,
            )
        case PaddedPrefill():
            return profile.prefill_time_s(work.num_seqs, work.padded_len)
        case PaddedDecode():
            return profile.decode_time_s(work.context, work.num_seqs)
