"""Model swapping blocks the instance for the load time (cold from storage, warm from host)."""

from __future__ import annotations

import pytest

from services.replica.core.model_tiers import ModelTiers
from services.replica.core.outputs import StepKind

GB = 10**9
# (weight bytes, warm PCIe bandwidth, cold storage bandwidth): every load time is distinct
SPECS = {"A": (2 * GB, 1e10, 1e9), "B": (3 * GB, 3e10, 5e8), "C": (1 * GB, 2e10, 4e8)}


def cold(model):
    w, _, c = SPECS[model]
    return w / c


def warm(model):
    w, s, _ = SPECS[model]
    return w / s


def profiles(h, models="AB"):
    return {
        m: h.profile(
            2048,
            model=m,
            weight_bytes=SPECS[m][0],
            swap_bytes_s=SPECS[m][1],
            cold_load_bytes_s=SPECS[m][2],
        )
        for m in models
    }


def loads(trace):
    return [(p.load_model, p.duration_s) for p in trace.plans(StepKind.LOAD_MODEL)]


@pytest.mark.parametrize("mode", ["continuous", "static"])
def test_replica_model_swap_cold_then_warm(h, mode):
    core = h.core(profiles=profiles(h), active="A", mode=mode)
    t1 = h.drive(core, [h.request("b1", 20, 5, model="B")])
    assert loads(t1) == [("B", pytest.approx(cold("B")))]
    load = t1.plans(StepKind.LOAD_MODEL)[0]
    assert t1.steps[0].plan is load  # the instance does nothing else first
    b1 = t1.finished["b1"]
    assert b1.first_token_s >= load.end_s  # no token of B before its weights are in
    assert core.tiers.active == "B" and core.tiers.tier("A") == "cpu"

    t2 = h.drive(core, [h.request("a1", 20, 5, model="A", arrival=t1.end_s)], t=t1.end_s)
    assert loads(t2) == [("A", pytest.approx(warm("A")))]
    t3 = h.drive(core, [h.request("b2", 20, 5, model="B", arrival=t2.end_s)], t=t2.end_s)
    assert loads(t3) == [("B", pytest.approx(warm("B")))]
    assert core.model_swaps == 3
    assert t3.finished["b2"].first_token_s >= t3.plans(StepKind.LOAD_MODEL)[0].end_s


def test_replica_model_swap_waits_for_running_work(h):
    """A head for another model blocks admission until the instance drains, then loads."""
    core = h.core(profiles=profiles(h), active="A")
    reqs = [
        h.request("a1", 20, 30, model="A", arrival=0.0),
        h.request("b1", 20, 5, model="B", arrival=0.001),
        h.request("a2", 20, 5, model="A", arrival=0.002),
    ]
    trace = h.drive(core, reqs)
    assert [m for m, _ in loads(trace)] == ["B", "A"]
    load_b, load_a = trace.plans(StepKind.LOAD_MODEL)
    assert load_b.start_s >= trace.finished["a1"].finish_s
    assert trace.finished["b1"].first_token_s >= load_b.end_s
    assert trace.finished["a2"].first_token_s >= load_a.end_s  # FCFS: behind b1
    for step in trace.steps:  # B never computes while A is active, and vice versa
        if step.plan.kind is StepKind.EXECUTE:
            models = {(core.sequence(c.rid) or trace.finished[c.rid]).model for c in step.chunks}
            assert len(models) == 1


def test_replica_no_active_model_loads_cold(h):
    core = h.core(profiles=profiles(h), active=None)
    assert core.status().active_model is None
    trace = h.drive(core, [h.request("c", 10, 3, model="A")])
    assert loads(trace) == [("A", pytest.approx(cold("A")))]
    assert trace.finished["c"].num_output_tokens == 3


def test_replica_small_host_cache_makes_swap_back_cold(h):
    # the cache holds B or A alone, not both; with three models the LRU one is dropped
    core = h.core(profiles=profiles(h, "ABC"), active="A", host_model_cache_bytes=3 * GB)
    t = 0.0
    seen = []
    for k, m in enumerate("BCA"):
        tr = h.drive(core, [h.request(f"x{k}", 10, 2, model=m, arrival=t)], t=t)
        seen += loads(tr)
        t = tr.end_s
    # B cold; C cold (A then B warm: 5 GB > 3 GB, A dropped); A cold again
    assert seen == [
        ("B", pytest.approx(cold("B"))),
        ("C", pytest.approx(cold("C"))),
        ("A", pytest.approx(cold("A"))),
    ]
    assert list(core.tiers.warm) == ["C"]  # B was evicted when A came back


def test_replica_request_for_unserved_model_is_refused(h):
    core = h.core(profiles=profiles(h), active="A")
    with pytest.raises(ValueError, match="cannot serve model 'Z'"):
        core.add_request(h.request("z", 5, 5, model="Z"), 0.0)
    assert not core.has_work


# ---- ModelTiers on its own --------------------------------------------------------------
def test_replica_model_tiers_lru(h):
    tiers = ModelTiers(profiles(h, "ABC"), host_model_cache_bytes=5 * GB, active="A")
    assert [tiers.tier(m) for m in "ABC"] == ["gpu", "cold", "cold"]
    assert tiers.load_time_s("A") == 0.0
    assert tiers.load_time_s("B") == pytest.approx(cold("B"))
    tiers.activate("B")
    assert list(tiers.warm) == ["A"]
    assert tiers.load_time_s("A") == pytest.approx(warm("A"))
    tiers.activate("C")  # warm A(2) + B(3) = 5 GB fits
    assert list(tiers.warm) == ["A", "B"]
    tiers.activate("A")  # A leaves the warm tier; C joins: B(3) + C(1)
    assert list(tiers.warm) == ["B", "C"]
    tiers.activate("B")  # C(1) + A(2)
    assert list(tiers.warm) == ["C", "A"]
    tiers.activate("C")  # A(2) + B(3) = 5
    assert list(tiers.warm) == ["A", "B"]


@pytest.mark.parametrize(("cache_gb", "warm_after"), [(0, []), (2, ["A"]), (1, [])])
def test_replica_model_tiers_capacity(h, cache_gb, warm_after):
    tiers = ModelTiers(profiles(h), host_model_cache_bytes=cache_gb * GB, active="A")
    tiers.activate("B")
    assert list(tiers.warm) == warm_after


def test_replica_model_tiers_reject_unknown(h):
    with pytest.raises(ValueError, match="'Z'"):
        ModelTiers(profiles(h), 0, active="Z")
    tiers = ModelTiers(profiles(h), 0, active="A")
    with pytest.raises(ValueError, match="'Z'"):
        tiers.activate("Z")
