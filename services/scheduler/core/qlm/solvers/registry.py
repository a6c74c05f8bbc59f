"""The global scheduler's solvers, registered by name (`GlobalSchedulerConfig.solver`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from services.scheduler.core.qlm.solvers.config import WorkLimits
from services.scheduler.core.qlm.solvers.ilp import ilp_plan
from services.scheduler.core.qlm.solvers.problem import GroupJob, Plan, QueueSlot
from shared.policy import Registry


class WindowSolver(Protocol):
    """Improves on `warm`, the heuristic's plan of `groups` (the ILP window), within budget:
    `work_limits` when given (deterministic), else `time_limit_s` on `timer`."""

    name: str

    def solve(
        self,
        groups: Sequence[GroupJob],
        queues: Sequence[QueueSlot],
        warm: Plan,
        time_limit_s: float,
        mip_rel_gap: float,
        timer: Callable[[], float],
        work_limits: WorkLimits | None = None,
    ) -> Plan: ...


class HeuristicSolver:
    """No optimization: the heuristic's plan as it is."""

    name = "heuristic"

    def solve(
        self,
        groups: Sequence[GroupJob],
        queues: Sequence[QueueSlot],
        warm: Plan,
        time_limit_s: float,
        mip_rel_gap: float,
        timer: Callable[[], float],
        work_limits: WorkLimits | None = None,
    ) -> Plan:
        return warm


class IlpSolver:
    """The ILP (QLM Eqs. 6-13) with the heuristic's plan as incumbent."""

    name = "ilp"

    def solve(
        self,
        groups: Sequence[GroupJob],
        queues: Sequence[QueueSlot],
        warm: Plan,
        time_limit_s: float,
        mip_rel_gap: float,
        timer: Callable[[], float],
        work_limits: WorkLimits | None = None,
    ) -> Plan:
        return ilp_plan(
            groups, queues, time_limit_s, mip_rel_gap, warm, timer, work_limits=work_limits
        )


GLOBAL_SOLVERS: Registry[WindowSolver] = Registry(
    "global solver", {HeuristicSolver.name: HeuristicSolver, IlpSolver.name: IlpSolver}
)
