"""The planner interface of the simulated engine (vLLM v1's Scheduler, seen from its EngineCore).

A planner owns one engine's SchedulerState (queues, KV pool, host swap space, counters) and its own
batching state. Each step the engine core calls `schedule`, which returns a data-only StepPlan:
the chunks to compute, the requests preempted or rejected, the KV moved, the shape of the forward
pass. The engine times that plan on its hardware profile and, once the step's time has passed,
hands it back to `update`, which commits the tokens and returns what the step produced.

The split with the engine core (services/replica/core/engine_core.py): the planner decides what
runs and keeps every request's state; the engine keeps what belongs to the instance — the model
tiers and which model is active, step durations from the HardwareProfile, busy and KV-time
accounting, and the validation of incoming requests against the instance's models.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping

from services.replica.core.outputs import StepKind, StepPlan, StepResult
from services.replica.core.scheduler_state import SchedulerState
from shared.domain import HardwareProfile
from shared.domain.engine import EngineConfig


class Planner(ABC):
    """Plans the steps of one engine over the SchedulerState it owns."""

    def __init__(self, config: EngineConfig, profiles: Mapping[str, HardwareProfile]) -> None:
        self.config = config
        self.state = SchedulerState(config, profiles)

    def schedule(self, now_s: float) -> StepPlan:
        """The next step: what `plan` chose, plus the KV swapped out since the last step."""
        plan = self.plan(now_s)
        if plan.kind is StepKind.EXECUTE:
            plan.swapped_out_tokens += self.state.take_swapped_out_tokens()
        plan.kv_used_fraction = self.state.pool.used / self.state.pool.num_blocks
        return plan

    @abstractmethod
    def plan(self, now_s: float) -> StepPlan:
        """Choose the next step (EXECUTE with its `work`, LOAD_MODEL or IDLE)."""

    @abstractmethod
    def update(self, plan: StepPlan) -> StepResult:
        """Apply a finished EXECUTE step: commit its tokens, finish or release sequences."""

    @staticmethod
    def load_plan(model: str, now_s: float) -> StepPlan:
        """Block the instance while `model` loads (the engine core times it from its tiers)."""
        return StepPlan(kind=StepKind.LOAD_MODEL, start_s=now_s, load_model=model)
