"""QLM global scheduler: config, registry, ILP window, fallback and counters."""

from __future__ import annotations

import highspy
import pytest
from pydantic import ValidationError
from qlm_problems import problem

from services.scheduler.core.qlm.solvers.brute_force import brute_force_plan
from services.scheduler.core.qlm.solvers.config import GlobalSchedulerConfig
from services.scheduler.core.qlm.solvers.global_scheduler import GlobalScheduler
from services.scheduler.core.qlm.solvers.heuristic import heuristic_plan
from services.scheduler.core.qlm.solvers.problem import GroupJob, evaluate
from services.scheduler.core.qlm.solvers.registry import GLOBAL_SOLVERS
from shared.policy import UnknownNameError

EXACT = GlobalSchedulerConfig(time_limit_s=60.0, mip_rel_gap=0.0)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("time_limit_s", 0.0),
        ("time_limit_s", -1.0),
        ("mip_rel_gap", -0.01),
        ("mip_rel_gap", 1.0),
        ("max_ilp_groups", 0),
        ("solver", "simplex"),
        ("timeout", 1.0),
    ],
)
def test_qlm_global_config_rejects_bad_values_naming_the_field(field, value):
    with pytest.raises(ValidationError, match=field):
        GlobalSchedulerConfig.model_validate({field: value})


def test_qlm_global_config_defaults():
    cfg = GlobalSchedulerConfig()
    assert (cfg.solver, cfg.time_limit_s, cfg.mip_rel_gap, cfg.max_ilp_groups) == (
        "ilp",
        0.1,
        0.02,
        8,
    )


def test_qlm_global_solvers_registry_lists_valid_names():
    assert GLOBAL_SOLVERS.names() == ["heuristic", "ilp"]
    with pytest.raises(UnknownNameError, match="valid: heuristic, ilp"):
        GLOBAL_SOLVERS.create("gurobi")


def test_qlm_global_heuristic_solver_returns_the_heuristic_plan():
    groups, queues = problem(6)
    plan = GlobalScheduler(GlobalSchedulerConfig(solver="heuristic")).plan(groups, queues)
    assert plan.status == "heuristic"
    assert plan.order == heuristic_plan(groups, queues).order


def test_qlm_global_ilp_over_everything_is_optimal():
    groups, queues = problem(5, seed=4)
    plan = GlobalScheduler(EXACT).plan(groups, queues)
    best = brute_force_plan(groups, queues)
    assert plan.objective == pytest.approx(best.objective, rel=1e-6)
    assert plan.status in ("optimal", "fallback")


@pytest.mark.parametrize(("n", "window"), [(9, 3), (12, 1), (7, 6)])
def test_qlm_global_window_yields_a_valid_plan_with_every_group_once(n, window):
    groups, queues = problem(n, seed=n)
    cfg = GlobalSchedulerConfig(time_limit_s=30.0, mip_rel_gap=0.0, max_ilp_groups=window)
    plan = GlobalScheduler(cfg).plan(groups, queues)
    placed = [gid for ids in plan.order.values() for gid in ids]
    assert sorted(placed) == sorted(x.group_id for x in groups)
    _, obj = evaluate(plan.order, groups, queues)
    assert plan.objective == pytest.approx(obj)
    assert plan.objective <= heuristic_plan(groups, queues).objective + 1e-9
    assert plan.status in ("feasible", "fallback")  # only the window was optimized
    if plan.status == "feasible":  # the ILP's window heads each queue, the rest follows
        urgent = sorted(groups, key=lambda x: (x.deadline_s, -x.size, x.group_id))[:window]
        in_window = {x.group_id for x in urgent}
        for ids in plan.order.values():
            flags = [gid in in_window for gid in ids]
            assert flags == sorted(flags, reverse=True)


def test_qlm_global_falls_back_and_counts_when_the_solver_fails(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("HiGHS failed")

    monkeypatch.setattr(highspy.Highs, "run", broken)
    groups, queues = problem(6)
    ticks = iter(range(1000))
    sched = GlobalScheduler(EXACT, timer=lambda: float(next(ticks)))
    plans = [sched.plan(groups, queues) for _ in range(3)]
    assert [p.status for p in plans] == ["fallback"] * 3
    assert all(p.order == heuristic_plan(groups, queues).order for p in plans)
    stats = sched.stats()
    assert (stats.solves, stats.fallbacks) == (3, 3)
    assert stats.total_solve_s == pytest.approx(sum(p.solve_s for p in plans))
    assert stats.mean_solve_s == pytest.approx(stats.total_solve_s / 3)


def test_qlm_global_counts_solves_without_fallbacks():
    groups, queues = problem(1)
    sched = GlobalScheduler(EXACT)
    plan = sched.plan(groups, queues)  # one group: nothing to optimize
    assert plan.status == "heuristic"
    assert plan.solve_s >= 0.0
    assert (sched.stats().solves, sched.stats().fallbacks) == (1, 0)


def test_qlm_global_names_a_group_no_queue_can_serve():
    groups, queues = problem(3)
    groups.append(GroupJob("stray", "z", 1, 1.0, {"elsewhere": 1.0}))
    with pytest.raises(ValueError, match="group 'stray'"):
        GlobalScheduler().plan(groups, queues)
