"""Batching planners of the simulated engine, by engine mode."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from services.replica.core.continuous import ContinuousPlanner
from services.replica.core.outputs import StepPlan, StepResult
from services.replica.core.scorpio_planner import ScorpioPlanner
from services.replica.core.static import StaticPlanner
from shared.domain.engine import EngineConfig

if TYPE_CHECKING:
    from services.replica.core.engine_core import SimEngineCore


class Planner(Protocol):
    def plan(self, core: SimEngineCore, now_s: float) -> StepPlan: ...

    def update(self, core: SimEngineCore, plan: StepPlan) -> StepResult: ...


def make_planner(config: EngineConfig) -> Planner:
    """The planner for `config.mode`; continuous engines with `config.scorpio` set get SCORPIO's
    guards (services/replica/core/scorpio_planner.py)."""
    mode = config.mode
    if mode == "continuous" and config.scorpio is not None:
        return ScorpioPlanner(config.scorpio)
    planners: dict[str, type[ContinuousPlanner] | type[StaticPlanner]] = {
        "continuous": ContinuousPlanner,
        "static": StaticPlanner,
    }
    if mode not in planners:
        raise ValueError(f"engine mode '{mode}' unknown; valid: {', '.join(planners)}")
    return planners[mode]()
