"""Routers (round-robin, least-loaded, oracle-backlog) and the RoutingPolicy around them."""

from __future__ import annotations

import pytest

from services.scheduler.global_policy import RoutingPolicy
from services.scheduler.routers import ROUTERS
from services.scheduler.routers.least_loaded import LeastLoadedRouter
from services.scheduler.routers.oracle_backlog import OracleBacklogRouter
from services.scheduler.routers.round_robin import RoundRobinRouter
from shared.policy.registry import UnknownNameError


def test_scheduler_round_robin_cycles(fakes):
    insts = [fakes.instance(f"i{k}") for k in range(3)]
    router = RoundRobinRouter()
    picks = [router.choose(fakes.request(f"r{k}"), insts, 0.0).name for k in range(7)]
    assert picks == ["i0", "i1", "i2", "i0", "i1", "i2", "i0"]


def test_scheduler_round_robin_is_per_model(fakes):
    insts = [fakes.instance(f"i{k}", models=("m", "n")) for k in range(2)]
    router = RoundRobinRouter()
    seq = ["m", "m", "n", "m", "n", "n"]
    picks = [
        router.choose(fakes.request(f"r{k}", model), insts, 0.0).name for k, model in enumerate(seq)
    ]
    # m: i0, i1, (n: i0), m: i0, (n: i1, i0)
    assert picks == ["i0", "i1", "i0", "i0", "i1", "i0"]


def test_scheduler_round_robin_instances_are_independent(fakes):
    insts = [fakes.instance(f"i{k}") for k in range(2)]
    a, b = ROUTERS.create("round-robin"), ROUTERS.create("round-robin")
    assert a.choose(fakes.request(), insts, 0.0).name == "i0"
    assert b.choose(fakes.request(), insts, 0.0).name == "i0"  # no state shared


@pytest.mark.parametrize(
    ("loads", "expected"),
    [
        ([(3, 1, 0), (0, 2, 0), (1, 1, 1)], "i1"),
        ([(0, 0, 5), (2, 2, 0)], "i1"),  # evicted requests count as load
        ([(1, 1, 0), (0, 2, 0), (2, 0, 0)], "i0"),  # ties go to the first
        ([(4, 4, 0), (4, 4, 0), (0, 0, 0)], "i2"),
    ],
)
def test_scheduler_least_loaded_picks_emptiest(fakes, loads, expected):
    insts = [
        fakes.instance(f"i{k}", waiting=w, running=r, evicted=e)
        for k, (w, r, e) in enumerate(loads)
    ]
    assert LeastLoadedRouter().choose(fakes.request(), insts, 0.0).name == expected


def test_scheduler_least_loaded_spreads_a_burst(fakes):
    insts = [fakes.instance(f"i{k}") for k in range(3)]
    policy = RoutingPolicy(LeastLoadedRouter())
    rejector = fakes.rejector()
    for k in range(9):
        policy.on_arrival(fakes.request(f"r{k}"), insts, rejector, 0.0)
    assert [len(i.submitted) for i in insts] == [3, 3, 3]
    assert rejector.rejected == []


# each instance: (speed, pending prefill tokens, outstanding output tokens, active model)
@pytest.mark.parametrize(
    ("instances", "expected"),
    [
        pytest.param([(1, 1000, 500, "m"), (1, 100, 50, "m")], "i1", id="emptier"),
        pytest.param([(1, 400, 200, "m"), (2, 400, 200, "m")], "i1", id="faster"),
        pytest.param([(1, 100, 100, "m"), (2, 800, 800, "m")], "i0", id="faster-but-fuller"),
        pytest.param([(1, 0, 0, "other"), (1, 100, 100, "m")], "i1", id="needs-model-load"),
        pytest.param([(1, 0, 0, "m"), (1, 0, 0, "m")], "i0", id="tie-first"),
        pytest.param([(2, 0, 0, "m"), (1, 0, 0, "m")], "i0", id="idle-tie-first"),
    ],
)
def test_scheduler_oracle_backlog(fakes, instances, expected):
    insts = [
        fakes.instance(
            f"i{k}", speed=s, pending_prefill_tokens=p, outstanding_output_tokens=o, active_model=a
        )
        for k, (s, p, o, a) in enumerate(instances)
    ]
    assert OracleBacklogRouter().choose(fakes.request(), insts, 0.0).name == expected


def test_scheduler_routing_policy_only_uses_eligible(fakes):
    insts = [
        fakes.instance("a", models=("x",)),
        fakes.instance("b", models=("m",)),
        fakes.instance("c", models=("m", "x")),
    ]
    policy = RoutingPolicy(RoundRobinRouter())
    rejector = fakes.rejector()
    for k in range(4):
        policy.on_arrival(fakes.request(f"m{k}", "m"), insts, rejector, 1.0)
    for k in range(2):
        policy.on_arrival(fakes.request(f"x{k}", "x"), insts, rejector, 1.0)
    assert [r.request_id for r in insts[0].submitted] == ["x0"]
    assert [r.request_id for r in insts[1].submitted] == ["m0", "m2"]
    assert [r.request_id for r in insts[2].submitted] == ["m1", "m3", "x1"]
    assert rejector.rejected == []


@pytest.mark.parametrize("router", ["round-robin", "least-loaded", "oracle-backlog"])
def test_scheduler_routing_policy_rejects_unserved_model(fakes, router):
    insts = [fakes.instance("a", models=("m",)), fakes.instance("b", models=("m",))]
    rejector = fakes.rejector()
    policy = RoutingPolicy(ROUTERS.create(router))
    policy.on_arrival(fakes.request("q", "zzz"), insts, rejector, 2.5)
    assert rejector.rejected == [("q", "no instance serves model 'zzz'", 2.5)]
    assert all(i.submitted == [] for i in insts)
    rejector2 = fakes.rejector()
    RoutingPolicy(ROUTERS.create(router)).on_arrival(fakes.request("q"), [], rejector2, 0.0)
    assert len(rejector2.rejected) == 1


def test_scheduler_router_registry(fakes):
    assert ROUTERS.names() == ["least-loaded", "oracle-backlog", "round-robin"]
    with pytest.raises(UnknownNameError, match="valid: least-loaded, oracle-backlog, round-robin"):
        ROUTERS.create("random")
