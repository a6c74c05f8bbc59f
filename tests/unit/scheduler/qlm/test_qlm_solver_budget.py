"""QLM global scheduler budget: wall-clock (live) depends on the clock, "work" (simulated runs)
does not, so a slow or loaded machine cannot change a simulated plan."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
from pydantic import ValidationError
from qlm_problems import problem

from services.scheduler.core.qlm.solvers.config import GlobalSchedulerConfig
from services.scheduler.core.qlm.solvers.global_scheduler import GlobalScheduler
from services.scheduler.core.qlm.solvers.heuristic import heuristic_plan


def slow_timer(step_s: float = 10.0) -> Callable[[], float]:
    """A clock on which every read is `step_s` later: a machine far too loaded for the budget."""
    ticks = itertools.count()
    return lambda: step_s * next(ticks)


@pytest.mark.parametrize(("n", "seed"), [(8, 2), (8, 3), (12, 2)])
def test_qlm_work_budget_plan_does_not_depend_on_the_clock(n, seed):
    groups, queues = problem(n, seed)
    cfg = GlobalSchedulerConfig(budget="work")
    fast = GlobalScheduler(cfg).plan(groups, queues)
    slow = GlobalScheduler(cfg, timer=slow_timer()).plan(groups, queues)
    assert fast.status == "feasible"  # the ILP ran and improved on the heuristic
    assert fast.objective < heuristic_plan(groups, queues).objective
    assert (slow.order, slow.objective, slow.status) == (fast.order, fast.objective, fast.status)


@pytest.mark.parametrize(("n", "seed"), [(8, 2), (12, 2)])
def test_qlm_wall_clock_budget_falls_back_on_a_slow_clock(n, seed):
    groups, queues = problem(n, seed)
    plan = GlobalScheduler(GlobalSchedulerConfig(), timer=slow_timer()).plan(groups, queues)
    assert plan.status == "fallback"
    assert plan.order == heuristic_plan(groups, queues).order


@pytest.mark.parametrize(
    ("update", "field"),
    [
        ({"budget": "cpu"}, "budget"),
        ({"work_limits": {"max_nodes": 0}}, "max_nodes"),
        ({"work_limits": {"max_improving_solutions": 0}}, "max_improving_solutions"),
        ({"work_limits": {"max_seconds": 1}}, "max_seconds"),
    ],
)
def test_qlm_budget_config_rejects_bad_values_naming_the_field(update, field):
    with pytest.raises(ValidationError, match=field):
        GlobalSchedulerConfig.model_validate(update)


def test_qlm_budget_defaults_to_wall_clock_for_the_live_scheduler():
    cfg = GlobalSchedulerConfig()
    assert (cfg.budget, cfg.time_limit_s) == ("wall_clock", 0.1)
