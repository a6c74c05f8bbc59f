"""The QLM global scheduler (services/scheduler/README.md, "Global scheduler"): heuristic plan
first, then the ILP over a window of the most urgent groups, the rest appended per queue by the
heuristic. Its budget is wall-clock time (live) or, with `budget="work"` (simulated runs),
deterministic work limits: then the injected timer only measures `solve_s`.

Never worse than the heuristic: a combined plan that scores worse than the heuristic's plan of
all groups is replaced by it (status "fallback").
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from services.scheduler.core.qlm.solvers.config import GlobalSchedulerConfig
from services.scheduler.core.qlm.solvers.heuristic import edf_key, heuristic_plan
from services.scheduler.core.qlm.solvers.problem import (
    GroupJob,
    Plan,
    QueueSlot,
    SolveStatus,
    scored_plan,
)
from services.scheduler.core.qlm.solvers.registry import GLOBAL_SOLVERS, WindowSolver


@dataclass(frozen=True, slots=True)
class SchedulerStats:
    """Counters for reporting, since the scheduler was created."""

    solves: int
    """Calls of `plan`."""
    fallbacks: int
    """Plans with status "fallback" (the solver failed, timed out or found nothing better)."""
    total_solve_s: float
    """Wall time of all `plan` calls (seconds)."""

    @property
    def mean_solve_s(self) -> float:
        return self.total_solve_s / self.solves if self.solves else 0.0


class GlobalScheduler:
    """Plans the order of every virtual queue; keeps counters."""

    def __init__(
        self,
        config: GlobalSchedulerConfig | None = None,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.config = config or GlobalSchedulerConfig()
        self._solver: WindowSolver = GLOBAL_SOLVERS.create(self.config.solver)
        self._timer = timer
        self._solves = 0
        self._fallbacks = 0
        self._total_s = 0.0

    def plan(self, groups: Sequence[GroupJob], queues: Sequence[QueueSlot]) -> Plan:
        """A plan for all `groups`; `solve_s` covers the whole call. ValueError on bad input."""
        t0 = self._timer()
        warm = heuristic_plan(groups, queues)  # validates the input, names a bad group
        result = warm
        if self.config.solver != "heuristic" and len(groups) > 1:
            result = self._optimize(groups, queues, warm, t0)
        solve_s = self._timer() - t0
        self._solves += 1
        self._fallbacks += result.status == "fallback"
        self._total_s += solve_s
        return dataclasses.replace(result, solve_s=solve_s)

    def stats(self) -> SchedulerStats:
        return SchedulerStats(self._solves, self._fallbacks, self._total_s)

    def _optimize(
        self, groups: Sequence[GroupJob], queues: Sequence[QueueSlot], warm: Plan, t0: float
    ) -> Plan:
        cfg = self.config
        urgent = sorted(groups, key=edf_key)
        window, rest = urgent[: cfg.max_ilp_groups], urgent[cfg.max_ilp_groups :]
        ids = {g.group_id for g in window}
        window_warm = warm
        if rest:
            kept = {q: [gid for gid in order if gid in ids] for q, order in warm.order.items()}
            window_warm = scored_plan(kept, window, queues, "heuristic")
        work = cfg.work_limits if cfg.budget == "work" else None
        budget = cfg.time_limit_s - (self._timer() - t0) if work is None else cfg.time_limit_s
        if budget <= 0:
            return dataclasses.replace(warm, status="fallback")
        head = self._solver.solve(
            window, queues, window_warm, budget, cfg.mip_rel_gap, self._timer, work
        )
        if not rest:
            return head
        tail = heuristic_plan(rest, _after(head.order, window, queues))
        order = {q.name: [*head.order[q.name], *tail.order[q.name]] for q in queues}
        status: SolveStatus = "feasible" if head.status == "optimal" else head.status
        combined = scored_plan(order, groups, queues, status)
        if combined.objective > warm.objective:
            return dataclasses.replace(warm, status="fallback")
        return combined


def _after(
    order: Mapping[str, Sequence[str]], groups: Sequence[GroupJob], queues: Sequence[QueueSlot]
) -> list[QueueSlot]:
    """The queues as they stand once `order` has been served: later ready, last model active."""
    by_id = {g.group_id: g for g in groups}
    out = []
    for q in queues:
        t, model = q.ready_s, q.active_model
        for gid in order.get(q.name, ()):
            g = by_id[gid]
            if g.model != model:
                t += q.drain_s + q.swap_s.get(g.model, 0.0)
                model = g.model
            t += g.service_s[q.name]
        out.append(dataclasses.replace(q, ready_s=t, active_model=model))
    return out
