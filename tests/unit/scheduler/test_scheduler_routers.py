"""Routers (round-robin, least-loaded, oracle-ttft) and the RoutingPolicy around them."""

from __future__ import annotations

import pytest

from services.scheduler.core.cluster_view import WorkItem
from services.scheduler.core.global_policy import RoutingPolicy
from services.scheduler.core.routers import ROUTERS
from services.scheduler.core.routers.least_loaded import LeastLoadedRouter
from services.scheduler.core.routers.oracle_ttft import OracleTTFTRouter, ttft_estimate_s
from services.scheduler.core.routers.round_robin import RoundRobinRouter
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


def _waiting(deadline_s: float, prefill: int) -> WorkItem:
    return WorkItem(deadline_s, False, prefill, prefill, 100)


def _running(context: int, remaining: int) -> WorkItem:
    return WorkItem(0.0, True, 1, context, remaining)


# the request under test arrives at 0 with a 10 s TTFT deadline, 100 prompt tokens, model "m"
# each instance: (speed, work items, active model, KV capacity tokens)
@pytest.mark.parametrize(
    ("instances", "expected"),
    [
        pytest.param(
            [(1, [_waiting(5, 20000)], "m", 10**6), (1, [], "m", 10**6)],
            "i1",
            id="earlier-deadline-work-ahead",
        ),
        # 50K tokens of batch work with later deadlines does not delay this request under EDF
        pytest.param(
            [(1, [_waiting(60, 50000)], "m", 10**6), (1, [_waiting(5, 9000)], "m", 10**6)],
            "i0",
            id="looser-work-is-jumped",
        ),
        pytest.param(
            [(1, [_waiting(5, 9000)], "m", 10**6), (2, [_waiting(5, 9000)], "m", 10**6)],
            "i1",
            id="faster",
        ),
        pytest.param(
            [(1, [], "other", 10**6), (1, [_waiting(5, 1000)], "m", 10**6)],
            "i1",
            id="needs-model-load",
        ),
        # KV short: i0's runner will grow to 1900 tokens and needs 900 more steps, i1's to 1005
        pytest.param(
            [(1, [_running(1000, 900)], "m", 1500), (1, [_running(1000, 5)], "m", 1500)],
            "i1",
            id="waits-for-memory",
        ),
        pytest.param([(1, [], "m", 10**6), (1, [], "m", 10**6)], "i0", id="tie-first"),
    ],
)
def test_scheduler_oracle_ttft(fakes, instances, expected):
    insts = [
        fakes.instance(f"i{k}", speed=s, items=items, active_model=a, kv_tokens=kv)
        for k, (s, items, a, kv) in enumerate(instances)
    ]
    req = fakes.request()
    estimates = {i.name: ttft_estimate_s(i, req) for i in insts}
    assert OracleTTFTRouter().choose(req, insts, 0.0).name == expected, estimates


@pytest.mark.parametrize(("remaining", "kv_tokens"), [(500, 1550), (50, 1550), (500, 10**6)])
def test_scheduler_oracle_ttft_memory_wait_tracks_true_remaining(fakes, remaining, kv_tokens):
    inst = fakes.instance("i0", items=[_running(1000, remaining)], kv_tokens=kv_tokens)
    step = inst.profile("m").decode_time_s(1000, 1)
    short = kv_tokens < 1000 + remaining + 100
    expected_floor = remaining * step if short else 0.0
    assert ttft_estimate_s(inst, fakes.request()) >= expected_floor
    assert (ttft_estimate_s(inst, fakes.request()) >= remaining * step) == short


def test_scheduler_oracle_ttft_unbounded_when_prompt_can_never_fit(fakes):
    inst = fakes.instance("i0", items=[_running(10, 5)], kv_tokens=50)
    assert ttft_estimate_s(inst, fakes.request()) == float("inf")


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


@pytest.mark.parametrize("router", ["round-robin", "least-loaded", "oracle-ttft"])
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
    names = ["least-loaded", "llm-d-scorers", "multiplex", "oracle-ttft", "pow2", "pow2-prefix"]
    assert ROUTERS.names() == [*names, "prefix-only", "round-robin", "static"]
    with pytest.raises(UnknownNameError, match="valid: least-loaded, llm-d-scorers, multiplex"):
        ROUTERS.create("random")
