"""QLM global scheduler: `evaluate` by hand, and the ILP (Eqs. 6-13) against brute force."""

from __future__ import annotations

import highspy
import numpy as np
import pytest

from services.scheduler.core.qlm.solvers.brute_force import brute_force_plan
from services.scheduler.core.qlm.solvers.heuristic import heuristic_plan
from services.scheduler.core.qlm.solvers.ilp import ilp_plan
from services.scheduler.core.qlm.solvers.problem import GroupJob, Plan, QueueSlot, evaluate

EXACT = {"mip_abs_gap": 1e-9}  # HiGHS stops at an absolute gap of 1e-6 by default


def hand_problem() -> tuple[list[GroupJob], list[QueueSlot]]:
    queues = [
        QueueSlot("A", "x", ready_s=1.0, drain_s=0.5, swap_s={"y": 2.0}),
        QueueSlot("B", None, ready_s=0.0, drain_s=0.0, swap_s={"x": 1.0, "y": 3.0}),
    ]
    groups = [
        GroupJob("g1", "x", 2, 1.5, {"A": 2.0, "B": 4.0}),
        GroupJob("g2", "y", 1, 4.0, {"A": 1.0, "B": 1.0}),
        GroupJob("g3", "x", 3, 0.5, {"A": 1.0, "B": 2.0}),
    ]
    return groups, queues


# Waits by hand: A starts at 1.0 with x active; a switch to y costs 0.5 + 2.0, back to x 0.5 + 0;
# B starts at 0.0 with nothing loaded, so its head always pays a swap.
@pytest.mark.parametrize(
    ("order", "waits", "violation", "size_wait"),
    [
        # A: g1 at 1.0 (no switch), g2 at 1.0+2+2.5 = 5.5; B: g3 at 0+1.0 = 1.0.
        # violation: g2 (5.5-4)·1 + g3 (1.0-0.5)·3 = 3.0; Σ size·wait = 2·1 + 1·5.5 + 3·1 = 10.5
        ({"A": ["g1", "g2"], "B": ["g3"]}, {"g1": 1.0, "g2": 5.5, "g3": 1.0}, 3.0, 10.5),
        # A: g2 at 1+2.5 = 3.5, g1 at 3.5+1+0.5 = 5.0; B: g3 at 1.0.
        # violation: g1 (5-1.5)·2 = 7 + g3 1.5 = 8.5; Σ size·wait = 3.5 + 10 + 3 = 16.5
        ({"A": ["g2", "g1"], "B": ["g3"]}, {"g1": 5.0, "g2": 3.5, "g3": 1.0}, 8.5, 16.5),
        # A: g3 at 1, g1 at 2, g2 at 4+2.5 = 6.5; violation 1.5 + 1 + 2.5 = 5; 3 + 4 + 6.5 = 13.5
        ({"A": ["g3", "g1", "g2"], "B": []}, {"g1": 2.0, "g2": 6.5, "g3": 1.0}, 5.0, 13.5),
        # B: g2 at 3.0, g3 at 3+1+1 = 5.0; A: g1 at 1.0. violation g3 (5-0.5)·3 = 13.5
        ({"A": ["g1"], "B": ["g2", "g3"]}, {"g1": 1.0, "g2": 3.0, "g3": 5.0}, 13.5, 20.0),
    ],
)
def test_qlm_evaluate_two_queues_by_hand(order, waits, violation, size_wait):
    groups, queues = hand_problem()
    got_waits, obj = evaluate(order, groups, queues)
    assert got_waits == pytest.approx(waits)
    assert obj == pytest.approx(violation + 1e-3 * size_wait)


@pytest.mark.parametrize(
    ("order", "message"),
    [
        ({"A": ["g1", "g2"], "C": ["g3"]}, "unknown queue 'C'"),
        ({"A": ["g1", "g2", "g1"], "B": ["g3"]}, "'g1' is unknown or placed twice"),
        ({"A": ["g1", "g2"]}, "unplaced: ['g3']"),
    ],
)
def test_qlm_evaluate_rejects_invalid_orders(order, message):
    groups, queues = hand_problem()
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        evaluate(order, groups, queues)


def test_qlm_evaluate_rejects_a_queue_that_cannot_serve():
    groups, queues = hand_problem()
    groups[1] = GroupJob("g2", "y", 1, 4.0, {"B": 1.0})
    with pytest.raises(ValueError, match="queue 'A' cannot serve group 'g2'"):
        evaluate({"A": ["g1", "g2"], "B": ["g3"]}, groups, queues)


def tiny_problem(seed: int, kind: str) -> tuple[list[GroupJob], list[QueueSlot]]:
    """<= 6 groups, <= 3 queues. kinds: one model; several models with swaps; overloaded."""
    rng = np.random.default_rng(seed)
    n_groups, n_queues = int(rng.integers(3, 7)), int(rng.integers(1, 4))
    models = ["m0"] if kind == "one-model" else ["m0", "m1", "m2"]
    queues = []
    for k in range(n_queues):
        active = [*models, None][int(rng.integers(len(models) + 1))]
        swap = {m: float(rng.uniform(0.5, 3.0)) for m in models}
        queues.append(QueueSlot(f"q{k}", active, float(rng.uniform(0, 2)), 0.3, swap))
    groups = []
    for i in range(n_groups):
        serving = [q.name for q in queues if rng.random() < 0.8] or [queues[0].name]
        service = {name: float(rng.uniform(0.5, 4.0)) for name in serving}
        late = 4.0 if kind == "overloaded" else 15.0
        deadline = float(rng.uniform(-1.0, late))
        model = models[int(rng.integers(len(models)))]
        groups.append(GroupJob(f"g{i}", model, int(rng.integers(1, 10)), deadline, service))
    return groups, queues


CASES = [(seed, kind) for kind in ("one-model", "swaps", "overloaded") for seed in range(8)]


def assert_valid(plan: Plan, groups: list[GroupJob], queues: list[QueueSlot]) -> None:
    placed = [gid for ids in plan.order.values() for gid in ids]
    assert sorted(placed) == sorted(g.group_id for g in groups)
    assert set(plan.order) == {q.name for q in queues}
    _, obj = evaluate(plan.order, groups, queues)  # raises on an ineligible queue
    assert plan.objective == pytest.approx(obj)


@pytest.mark.parametrize(("seed", "kind"), CASES)
def test_qlm_ilp_matches_brute_force(seed, kind):
    groups, queues = tiny_problem(seed, kind)
    best = brute_force_plan(groups, queues)
    plan = ilp_plan(groups, queues, time_limit_s=60.0, mip_rel_gap=0.0, highs_options=EXACT)
    assert_valid(plan, groups, queues)
    assert plan.objective == pytest.approx(best.objective, rel=1e-6, abs=1e-9)
    if heuristic_plan(groups, queues).objective > best.objective * (1 + 1e-6) + 1e-9:
        assert plan.status == "optimal"  # the ILP's own plan, not its warm start
    else:
        assert plan.status in ("optimal", "fallback")  # fallback: the warm start was optimal
    if kind == "overloaded":
        assert best.violating  # violations are unavoidable; the ILP still minimizes them


def test_qlm_tiny_cases_exercise_the_ilp():
    """In enough of the cases above the heuristic is suboptimal, so the ILP must do the work."""
    worse = 0
    for seed, kind in CASES:
        groups, queues = tiny_problem(seed, kind)
        best = brute_force_plan(groups, queues).objective
        worse += heuristic_plan(groups, queues).objective > best * (1 + 1e-6) + 1e-9
    assert worse >= 5


def test_qlm_ilp_improves_on_a_bad_warm_start():
    groups, queues = hand_problem()
    bad = heuristic_plan(groups, queues)
    worst = {"A": ["g2", "g1"], "B": ["g3"]}  # 8.5165 by hand
    warm = Plan(worst, evaluate(worst, groups, queues)[1], (), "heuristic")
    plan = ilp_plan(groups, queues, 60.0, 0.0, warm_start=warm, highs_options=EXACT)
    assert plan.status == "optimal"
    assert plan.objective == pytest.approx(brute_force_plan(groups, queues).objective)
    assert plan.objective <= bad.objective


def test_qlm_ilp_falls_back_when_the_solver_fails(monkeypatch):
    groups, queues = tiny_problem(3, "swaps")

    def broken(*args, **kwargs):
        raise RuntimeError("HiGHS failed")

    monkeypatch.setattr(highspy.Highs, "run", broken)
    plan = ilp_plan(groups, queues, 1.0, 0.02)
    assert plan.status == "fallback"
    assert plan.order == heuristic_plan(groups, queues).order
    assert_valid(plan, groups, queues)


def test_qlm_ilp_falls_back_when_time_runs_out_before_the_solve():
    groups, queues = tiny_problem(5, "swaps")
    clock = iter(np.arange(0.0, 100.0, 1.0))  # every reading of the clock is a second later
    plan = ilp_plan(groups, queues, 0.5, 0.02, timer=lambda: float(next(clock)))
    assert plan.status == "fallback"
    assert plan.solve_s >= 1.0
    assert_valid(plan, groups, queues)
    tiny = ilp_plan(groups, queues, 1e-9, 0.02)
    assert tiny.status == "fallback"
    assert tiny.order == heuristic_plan(groups, queues).order


def test_qlm_ilp_time_limited_plan_is_valid_and_no_worse_than_the_warm_start():
    rng = np.random.default_rng(7)
    queues = [QueueSlot(f"q{k}", "m0", 0.0, 0.5, {"m0": 1.0, "m1": 2.0}) for k in range(4)]
    groups = [
        GroupJob(
            f"g{i}",
            f"m{i % 2}",
            1 + i % 5,
            float(rng.uniform(0, 10)),
            {q.name: 2.0 for q in queues},
        )
        for i in range(24)
    ]
    warm = heuristic_plan(groups, queues)
    plan = ilp_plan(groups, queues, 0.05, 0.02, warm_start=warm)
    assert plan.status in ("feasible", "fallback", "optimal")
    assert_valid(plan, groups, queues)
    assert plan.objective <= warm.objective + 1e-9


@pytest.mark.parametrize("solver", ["ilp", "heuristic", "brute"])
def test_qlm_solvers_name_a_group_no_queue_can_serve(solver):
    groups, queues = hand_problem()
    groups.append(GroupJob("orphan", "z", 1, 1.0, {"C": 1.0}))
    run = {
        "ilp": lambda: ilp_plan(groups, queues, 1.0, 0.02),
        "heuristic": lambda: heuristic_plan(groups, queues),
        "brute": lambda: brute_force_plan(groups, queues),
    }[solver]
    with pytest.raises(ValueError, match="group 'orphan'"):
        run()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"time_limit_s": 0.0, "mip_rel_gap": 0.02}, "time_limit_s"),
        ({"time_limit_s": 1.0, "mip_rel_gap": -0.1}, "mip_rel_gap"),
        ({"time_limit_s": 1.0, "mip_rel_gap": 0.02, "max_positions": 0}, "max_positions"),
    ],
)
def test_qlm_ilp_rejects_bad_parameters(kwargs, message):
    groups, queues = hand_problem()
    with pytest.raises(ValueError, match=message):
        ilp_plan(groups, queues, **kwargs)


def test_qlm_ilp_empty_and_single_group():
    _, queues = hand_problem()
    empty = ilp_plan([], queues, 1.0, 0.02)
    assert empty.order == {"A": (), "B": ()} and empty.objective == 0.0
    one = [GroupJob("g", "y", 2, 10.0, {"A": 1.0, "B": 1.0})]
    plan = ilp_plan(one, queues, 10.0, 0.0, highs_options=EXACT)
    # A: 1.0 + 0.5 + 2.0 = 3.5; B: 0 + 3.0 = 3.0 -> B, objective 1e-3·2·3.0
    assert plan.order == {"A": (), "B": ("g",)}
    assert plan.objective == pytest.approx(0.006)
