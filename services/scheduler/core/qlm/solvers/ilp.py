"""The global scheduler's ILP solver (QLM Eqs. 6-13, model in `ilp_model`), solved by HiGHS.

Warm start: the warm start is used as the incumbent, not handed to HiGHS as a MIP start: its
objective goes to HiGHS as `objective_bound` (nodes that cannot beat it are pruned), and it is
what we return, status "fallback", when the solver fails, runs out of time, or ends with a plan
that is no better. (A MIP start would change which plans the work limits stop on.)

Budget: wall-clock (live; `time_limit_s`), or, with `work_limits`, deterministic limits in solver
work (simulated runs: HiGHS stopped by time ends on a plan that depends on machine load).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import highspy

from services.scheduler.core.qlm.solvers.config import WorkLimits
from services.scheduler.core.qlm.solvers.heuristic import heuristic_plan
from services.scheduler.core.qlm.solvers.ilp_model import build_model, decode
from services.scheduler.core.qlm.solvers.problem import (
    GroupJob,
    Plan,
    QueueSlot,
    SolveStatus,
    check_problem,
    evaluate,
    scored_plan,
)

_REL_TOL = 1e-9
"""An ILP plan must not be worse than the warm start by more than this (relative) to be kept."""
_HIGHS_SHARE = 0.8
"""Share of the time left after model building that HiGHS gets as its own time limit: it checks
the limit only between phases (presolve, root LP), so it overruns a little, and the results
still have to be unpacked."""
_THREADS = 1
"""HiGHS worker threads. The ILP stops at its root node (or a short wall-clock budget), where a
second worker finds nothing the first does not: measured on the 338 solves of one qlm-wc probe,
one thread returns the same plans for about 20% less CPU, and leaves the other core to the
engines and the scheduler's event loop."""
_PRESOLVE_OFF_BELOW = 2000
"""Binaries under which HiGHS presolve is switched off. Measured (bench-solver, 8 queues, 0.1 s):
on models this small presolve takes most of the budget and finds little; on larger ones the
root LP without it overruns the time limit (HiGHS does not stop inside the root LP)."""


def ilp_plan(
    groups: Sequence[GroupJob],
    queues: Sequence[QueueSlot],
    time_limit_s: float,
    mip_rel_gap: float,
    warm_start: Plan | None = None,
    timer: Callable[[], float] = time.perf_counter,
    *,
    max_positions: int | None = None,
    highs_options: Mapping[str, Any] | None = None,
    work_limits: WorkLimits | None = None,
) -> Plan:
    """The best plan HiGHS finds within `time_limit_s` (all of this call: model building and the
    solve), never worse than `warm_start` (default: the heuristic).

    Status "optimal" when HiGHS proved optimality within `mip_rel_gap`, "feasible" for an
    incumbent it stopped on at the time limit, "fallback" (the warm start) when it failed, timed
    out without a plan, or its plan was no better. `max_positions` caps the positions per queue
    (None: as many as the queue has eligible groups, which keeps the ILP exact). With
    `work_limits`, HiGHS is bounded by them instead and `time_limit_s` and `timer` decide
    nothing (`timer` still times the call for `solve_s`). Raises ValueError on invalid input
    only, never on solver failure.
    """
    t0 = timer()
    if not time_limit_s > 0:
        raise ValueError(f"time_limit_s must be > 0 seconds, got {time_limit_s}")
    if not 0 <= mip_rel_gap < 1:
        raise ValueError(f"mip_rel_gap must be in [0, 1), got {mip_rel_gap}")
    if max_positions is not None and max_positions < 1:
        raise ValueError(f"max_positions must be >= 1 or None, got {max_positions}")
    check_problem(groups, queues)
    warm = warm_start if warm_start is not None else heuristic_plan(groups, queues)
    _, warm_obj = evaluate(warm.order, groups, queues)  # also checks it is a plan of this input

    def done(plan: Plan, status: SolveStatus | None = None) -> Plan:
        st = plan.status if status is None else status
        return Plan(plan.order, plan.objective, plan.violating, st, timer() - t0)

    if not groups:
        return done(scored_plan({}, groups, queues, "optimal"))
    status: highspy.HighsModelStatus | None = None
    order = None
    try:
        model = build_model(groups, queues, max_positions)
        remaining = time_limit_s - (timer() - t0)
        if work_limits is not None or remaining > 0:
            opts: dict[str, Any] = {
                **_budget_options(remaining, work_limits),
                "mip_rel_gap": mip_rel_gap,
                "objective_bound": warm_obj * (1 + 1e-6) + 1e-6,
                "presolve": "off" if len(model.x_queue) < _PRESOLVE_OFF_BELOW else "choose",
                "threads": _THREADS,
                **(highs_options or {}),
            }
            status, col_value = _run_highs(model.model, opts)
            if col_value is not None:
                order = decode(model, col_value, groups, queues)
    except Exception:  # a solver failure must never take the scheduler down
        order = None
    if order is None:
        return done(warm, "fallback")
    optimal = status == highspy.HighsModelStatus.kOptimal
    plan = scored_plan(order, groups, queues, "optimal" if optimal else "feasible")
    if plan.objective > warm_obj * (1 + _REL_TOL) + _REL_TOL:
        return done(warm, "fallback")
    return done(plan)


_STOPPED = {
    highspy.HighsModelStatus.kOptimal,
    highspy.HighsModelStatus.kObjectiveBound,
    highspy.HighsModelStatus.kObjectiveTarget,
    highspy.HighsModelStatus.kTimeLimit,
    highspy.HighsModelStatus.kIterationLimit,
    highspy.HighsModelStatus.kSolutionLimit,
}
"""Statuses of a run that ended normally (proved optimal, or stopped by a limit or the bound);
its solution is read when HiGHS holds a valid one."""


def _run_highs(
    model: highspy.HighsModel, options: Mapping[str, Any]
) -> tuple[highspy.HighsModelStatus, list[float] | None]:
    """One HiGHS run, silent: its status and, if it holds a solution, every column's value.
    ValueError when HiGHS refuses an option."""
    h = highspy.Highs()  # type: ignore[no-untyped-call]
    h.setOptionValue("output_flag", False)
    for name, value in options.items():
        if h.setOptionValue(name, value) == highspy.HighsStatus.kError:
            raise ValueError(f"HiGHS refused option {name}={value!r}")
    h.passModel(model)
    h.run()
    status = h.getModelStatus()
    sol = h.getSolution()
    if status not in _STOPPED or not sol.value_valid:
        return status, None
    return status, list(sol.col_value)


def _budget_options(remaining_s: float, work_limits: WorkLimits | None) -> dict[str, Any]:
    """HiGHS options bounding the run: its time limit, or the deterministic work limits."""
    if work_limits is None:
        return {"time_limit": remaining_s * _HIGHS_SHARE}
    return {
        "mip_max_nodes": work_limits.max_nodes,
        "mip_max_improving_sols": work_limits.max_improving_solutions,
    }
