"""Direct dispatch of tight TTFT classes and cost-aware eviction (qlm/tight_classes.py), as pure
functions (tables) and inside the `qlm` policy on fake instances."""

from __future__ import annotations

import pytest

from services.predictor.core.registry import create_predictor
from services.scheduler.core.qlm.config import QLMConfig
from services.scheduler.core.qlm.policy import QLMPolicy
from services.scheduler.core.qlm.tight_classes import (
    EvictionCostConfig,
    TightClassConfig,
    choose_direct,
    direct_candidates,
    eviction_pays,
    is_tight,
    swap_pending,
)
from shared.domain import SLO, Request

TIGHT = SLO(0.5, class_name="tight")
CHAT = SLO(3.0, class_name="chat")
BATCH2 = SLO(3600.0, class_name="batch-2")


def req(rid: str, slo: SLO = BATCH2, model: str = "m", at: float = 0.0, n_in: int = 100) -> Request:
    return Request(rid, model, n_in, 64, at, slo, true_output_tokens=32)


def policy(**cfg: object) -> QLMPolicy:
    base: dict[str, object] = {"lengths": "true", "reject_over_slo_factor": None}
    return QLMPolicy(
        QLMConfig.model_validate(base | cfg), predictor=create_predictor("online-histogram")
    )


@pytest.mark.parametrize(
    ("limit", "slo", "tight"),
    [(None, TIGHT, False), (1.0, TIGHT, True), (1.0, CHAT, False), (3.0, CHAT, True)],
)
def test_is_tight_compares_the_ttft_slo_with_the_limit(limit, slo, tight):
    assert is_tight(TightClassConfig(direct_max_ttft_s=limit), req("r", slo)) is tight


@pytest.mark.parametrize(
    ("loads", "active_only", "expected"),
    [
        # (name, models, active model, waiting, running) -> chosen name
        ([("a", ("m",), "m", 3, 2), ("b", ("m",), "m", 0, 4)], False, "b"),
        ([("a", ("m",), "m", 1, 1), ("b", ("m",), "m", 1, 1)], False, "a"),  # ties: first
        ([("a", ("m", "x"), "x", 0, 0), ("b", ("m",), "m", 5, 5)], False, "b"),  # active first
        ([("a", ("x",), "x", 0, 0), ("b", ("m",), "m", 9, 9)], False, "b"),  # serves the model
        ([("a", ("x",), "x", 0, 0)], False, None),
        ([("a", ("m", "x"), "x", 0, 0)], False, "a"),  # a swap is acceptable...
        ([("a", ("m", "x"), "x", 0, 0)], True, None),  # ...unless only active models count
    ],
)
def test_choose_direct_prefers_active_model_then_fewest_outstanding(
    fakes, loads, active_only, expected
):
    insts = [
        fakes.instance(n, models=ms, active_model=act, waiting=w, running=r)
        for n, ms, act, w, r in loads
    ]
    chosen = choose_direct(req("r", TIGHT), insts, active_only)
    assert (chosen.name if chosen else None) == expected


# fake profile at speed 1: T_prefill(1, L) = 1e-4·L + 0.01 s (tests/unit/scheduler/conftest.py)
@pytest.mark.parametrize(
    ("cfg", "speed", "head", "victims", "slack", "room_wait", "pays", "why"),
    [
        ({}, 1.0, [100], [10_000], 0.1, 5.0, True, "cost not weighed"),
        ({"weigh_cost": True}, None, [100], [400], 1.0, 5.0, False, "no profile"),
        # head prefill 0.02 s, victims 0.05 s, saves 4.98 s
        ({"weigh_cost": True}, 1.0, [100], [400], 1.0, 5.0, True, "pays"),
        # 100x slower (a CPU): head prefill 2 s > slack 1 s
        ({"weigh_cost": True}, 0.01, [100], [400], 1.0, 5.0, False, "late anyway"),
        # head makes it (0.2 s <= 1 s), but re-prefill 5.0 s >= saved 4.8 s
        ({"weigh_cost": True}, 0.1, [100], [4900], 1.0, 5.0, False, "re-prefill"),
        ({"weigh_cost": True, "cost_factor": 0.5}, 0.1, [100], [4900], 1.0, 5.0, True, "pays"),
    ],
)
def test_eviction_pays_weighs_reprefill_against_the_saved_wait(
    fakes, cfg, speed, head, victims, slack, room_wait, pays, why
):
    profile = None if speed is None else fakes.profile(speed=speed)
    v = eviction_pays(EvictionCostConfig(**cfg), profile, head, victims, slack, room_wait)
    assert v.pays is pays
    assert why in v.reason


def test_tight_request_skips_a_full_window_and_looser_ones_wait(fakes):
    busy = fakes.instance("i0", waiting=4, running=8)
    idle = fakes.instance("i1", waiting=4, running=2)
    p = policy(pull_window_requests=4, tight={"direct_max_ttft_s": 1.0})
    rej = fakes.rejector()
    p.on_arrival(req("chat", CHAT), [busy, idle], rej, 0.0)
    p.on_arrival(req("tight", TIGHT), [busy, idle], rej, 0.0)
    assert [r.request_id for r in idle.submitted] == ["tight"]  # fewest outstanding
    assert busy.submitted == []
    assert len(p.grouper) == 1  # chat stays in the virtual queue behind the full windows
    assert p.ops.direct_dispatches == 1 and rej.rejected == []
    p.on_finish(req("tight", TIGHT), "i1", 32, rej, 1.0)
    assert "tight" not in p.ops.placed["i1"]


def _urgent_head_on_full_instance(fakes, p: QLMPolicy, speed: float):
    inst = fakes.instance("i0", speed=speed)
    rej = fakes.rejector()
    for rid, t in [("b2-old", 100.0), ("b2-new", 102.0)]:
        p.on_arrival(req(rid, BATCH2, at=t, n_in=400), [inst], rej, t)
    inst.waiting, inst.kv_used_blocks = p.cfg.pull_window_requests, 95  # no room left
    # 0.1 s of slack left at 103 s; a seat frees up in 0.15 s (speed 1) or 15 s (speed 0.01)
    p.on_arrival(req("hot", CHAT, at=100.1, n_in=200), [inst], rej, 103.0)
    return inst


@pytest.mark.parametrize(
    ("weigh", "speed", "evicts"),
    [
        (False, 1.0, True),  # the paper: evict whenever the head is urgent
        (True, 1.0, True),  # GPU-like: prefill 0.03 s, re-prefill 0.05 s, saves 0.12 s
        (False, 0.01, True),
        (True, 0.01, False),  # CPU-like: the head's own prefill (3 s) misses its 0.5 s slack
    ],
)
def test_cost_aware_eviction_stops_where_reprefill_is_slow(fakes, weigh, speed, evicts):
    p = policy(pull_window_requests=2, eviction={"weigh_cost": weigh})
    inst = _urgent_head_on_full_instance(fakes, p, speed)
    assert bool(inst.evicted_ids) is evicts
    assert p.ops.evictions_declined == (0 if evicts else 1)
    assert ("hot" in [r.request_id for r in inst.submitted]) is evicts


@pytest.mark.parametrize(
    ("queues", "model", "expected"),
    [
        ({"a": ["m", "m"], "b": []}, "m", set()),
        ({"a": ["m", "x"], "b": ["m"]}, "m", {"a"}),
        ({"a": ["x"], "b": ["y"]}, "x", {"b"}),
    ],
)
def test_swap_pending_names_instances_with_another_model_queued(queues, model, expected):
    assert swap_pending(queues, model) == expected


@pytest.mark.parametrize(("yield_to_swaps", "direct"), [(False, True), (True, False)])
def test_direct_dispatch_yields_to_a_planned_swap(fakes, yield_to_swaps, direct):
    inst = fakes.instance("i0", models=("m", "x"), active_model="m", waiting=4)
    p = policy(
        pull_window_requests=4,
        tight={
            "direct_max_ttft_s": 3600.0,
            "active_model_only": True,
            "yield_to_swaps": yield_to_swaps,
        },
    )
    rej = fakes.rejector()
    p.on_arrival(req("x0", BATCH2, model="x"), [inst], rej, 0.0)  # model not loaded: queued
    assert inst.submitted == [] and len(p.grouper) == 1
    p.on_arrival(req("m0", CHAT, model="m"), [inst], rej, 0.0)
    assert ([r.request_id for r in inst.submitted] == ["m0"]) is direct


@pytest.mark.parametrize(
    ("cfg", "queues", "seen", "expected"),
    [
        # instances: a serves m only, b serves m and x; b's virtual queue holds an x group
        ({}, {}, {"m", "x"}, ["a", "b"]),
        ({"single_model_only": True}, {}, {"m", "x"}, ["a"]),
        ({"single_model_only": True}, {}, {"m"}, ["a", "b"]),  # x never seen: b never swaps
        ({"yield_to_swaps": True}, {"b": ["x"]}, {"m", "x"}, ["a"]),
        ({"yield_to_swaps": True}, {"a": ["m"], "b": ["m"]}, {"m", "x"}, ["a", "b"]),
    ],
)
def test_direct_candidates_single_model_and_planned_swaps(fakes, cfg, queues, seen, expected):
    insts = [
        fakes.instance("a", models=("m",), active_model="m"),
        fakes.instance("b", models=("m", "x"), active_model="m"),
    ]
    out = direct_candidates(TightClassConfig(**cfg), req("r", CHAT), insts, queues, seen)
    assert [i.name for i in out] == expected


@pytest.mark.parametrize(("single_model_only", "direct"), [(False, True), (True, False)])
def test_direct_dispatch_only_to_single_model_instances(fakes, single_model_only, direct):
    """Regression (qlm-wc): on instances that serve several models every request
    stays in QLM's queues, so its planner sees all the work it batches into swaps."""
    inst = fakes.instance("i0", models=("m", "x"), active_model="m")
    tight = {"direct_max_ttft_s": 3600.0, "active_model_only": True}
    p = policy(tight=tight | {"single_model_only": single_model_only})
    rej = fakes.rejector()
    p.on_arrival(req("x0", BATCH2, model="x"), [inst], rej, 0.0)  # x seen: i0 may swap
    p.on_finish(req("x0", BATCH2, model="x"), "i0", 32, rej, 0.5)  # x0 pulled and done
    p.on_arrival(req("m0", CHAT, model="m"), [inst], rej, 1.0)
    assert (p.ops.direct_dispatches == 1) is direct
    assert "m0" in [r.request_id for r in inst.submitted]  # pulled at once when not direct


@pytest.mark.parametrize(
    ("while_empty", "queue_x_first", "direct"),
    [
        (False, False, ["a0"]),  # tenants contend: b0 is queued though nothing else is
        (True, False, ["a0", "b0"]),  # nothing queued: fairness has nothing to choose between
        (True, True, ["a0"]),  # x0 waits in the queue: b0 queues too, for fairness to order
    ],
)
def test_contended_tight_work_goes_direct_only_while_nothing_is_queued(
    fakes, while_empty, queue_x_first, direct
):
    inst = fakes.instance("i0", models=("m", "x"), active_model="m", waiting=4)  # window full
    tight = {
        "direct_max_ttft_s": 3600.0,
        "active_model_only": True,
        "direct_while_queue_empty": while_empty,
    }
    p = policy(pull_window_requests=4, tight=tight)
    rej = fakes.rejector()
    arrivals = [("a0", "a", "m")] + [("x0", "a", "x")] * queue_x_first + [("b0", "b", "m")]
    for k, (rid, tenant, model) in enumerate(arrivals):
        r = Request(rid, model, 100, 64, 0.1 * k, CHAT, tenant=tenant, true_output_tokens=32)
        p.on_arrival(r, [inst], rej, 0.1 * k)
    assert [r.request_id for r in inst.submitted] == direct
    assert p.ops.direct_dispatches == len(direct) and rej.rejected == []
    assert sum(g.size for g in p.grouper.groups()) == len(arrivals) - len(direct)  # queued
