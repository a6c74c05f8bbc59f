"""The ILP under the simulator's work limits returns the plans it returned when the model went
to HiGHS through cvxpy: HiGHS stops on its first improving plan at the root node, and which plan
that is depends on the model's layout (column and row order), so building the HiGHS model
directly must keep that layout. Expected plans: the cvxpy path's, on these problems."""

from __future__ import annotations

import pytest
from qlm_problems import problem

from services.scheduler.core.qlm.solvers.config import WorkLimits
from services.scheduler.core.qlm.solvers.heuristic import heuristic_plan
from services.scheduler.core.qlm.solvers.ilp import ilp_plan


@pytest.mark.parametrize(
    ("n", "seed", "status", "queue_a", "queue_b"),
    [
        (4, 0, "feasible", "g3 g1", "g0 g2"),
        (6, 1, "optimal", "g5 g0 g1", "g2 g4 g3"),
        (6, 2, "feasible", "g1 g5", "g4 g0 g3 g2"),
        (8, 0, "feasible", "g3 g5 g4 g1", "g0 g2 g7 g6"),
        (8, 1, "optimal", "g0 g5 g1 g7", "g2 g6 g3 g4"),
        (8, 2, "feasible", "g5 g1 g6", "g7 g0 g4 g3 g2"),
        (8, 3, "feasible", "g6 g3 g1 g7", "g2 g0 g4 g5"),
        (8, 4, "feasible", "g5 g1", "g2 g7 g0 g3 g6 g4"),
    ],
)
def test_qlm_ilp_work_limited_plans_are_unchanged(n, seed, status, queue_a, queue_b):
    groups, queues = problem(n, seed)
    plan = ilp_plan(groups, queues, 1.0, 0.02, work_limits=WorkLimits())
    assert plan.status == status
    assert plan.order == {"A": tuple(queue_a.split()), "B": tuple(queue_b.split())}
    assert plan.objective <= heuristic_plan(groups, queues).objective
