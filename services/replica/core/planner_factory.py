"""The planner an EngineConfig asks for, for callers that only have a config.

continuous -> ContinuousPlanner (vLLM v1's scheduling), or ScorpioPlanner when `config.scorpio`
is set (SCORPIO's guards on top of it); static -> StaticPlanner (SLS/SCLS/UELLM batches).
The engine core is handed the planner; it never builds one itself.
"""

from __future__ import annotations

from collections.abc import Mapping

from services.replica.core.continuous import ContinuousPlanner
from services.replica.core.planner import Planner
from services.replica.core.scorpio_planner import ScorpioPlanner
from services.replica.core.static import StaticPlanner
from shared.domain import HardwareProfile
from shared.domain.engine import EngineConfig


def make_planner(config: EngineConfig, profiles: Mapping[str, HardwareProfile]) -> Planner:
    """A new planner (with its own empty SchedulerState) for an engine serving `profiles`."""
    mode = config.mode
    if mode == "continuous" and config.scorpio is not None:
        return ScorpioPlanner(config, profiles)
    planners: dict[str, type[ContinuousPlanner] | type[StaticPlanner]] = {
        "continuous": ContinuousPlanner,
        "static": StaticPlanner,
    }
    if mode not in planners:
        raise ValueError(f"engine mode '{mode}' unknown; valid: {', '.join(planners)}")
    return planners[mode](config, profiles)
