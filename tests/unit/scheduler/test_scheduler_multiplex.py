"""Ray Serve's model multiplexing as its source states it (model-affine candidates, the replicas
with the fewest models on a miss, an LRU of k models per replica), and a static placement."""

from __future__ import annotations

import pytest

from services.scheduler.core.routers import ROUTERS
from services.scheduler.core.routers.multiplex import MultiplexParams, MultiplexRouter
from services.scheduler.core.routers.static_placement import StaticParams, StaticRouter

MODELS = ("A", "B", "C")


def fleet(fakes, actives, **loads):
    return [
        fakes.instance(f"i{k}", models=MODELS, active_model=a, waiting=loads.get(f"i{k}", 0))
        for k, a in enumerate(actives)
    ]


def test_multiplex_sends_a_model_to_the_replica_that_has_it_even_when_busier(fakes):
    insts = fleet(fakes, ["A", "B"], i1=9)
    router = MultiplexRouter()
    for k in range(20):
        assert router.choose(fakes.request(f"r{k}", "B"), insts, 0.0).name == "i1"


def test_multiplex_miss_goes_to_fewest_models_and_evicts_the_lru_one(fakes):
    insts = fleet(fakes, ["A", "B"], i0=3)
    router = MultiplexRouter()
    # a miss (C) with every replica holding one model: power of two among all, i1 less loaded
    assert router.choose(fakes.request("c", "C"), insts, 0.0).name == "i1"
    assert list(router.loaded["i1"]) == ["C"]  # k = 1: B left the replica
    # B now has no replica: another miss, again among all replicas
    assert router.choose(fakes.request("b", "B"), insts, 0.0).name == "i1"
    assert list(router.loaded["i1"]) == ["B"]
    assert list(router.loaded["i0"]) == ["A"]


def test_multiplex_keeps_k_models_least_recently_used_first(fakes):
    insts = fleet(fakes, ["A"])
    router = MultiplexRouter(MultiplexParams(max_models_per_replica=2))
    for model in ("B", "A", "C"):
        router.choose(fakes.request(model, model), insts, 0.0)
    assert list(router.loaded["i0"]) == ["A", "C"]  # B was the least recently used


def test_multiplex_prefers_replicas_with_fewer_models_on_a_miss(fakes):
    insts = fleet(fakes, ["A", None], i1=50)
    router = MultiplexRouter(MultiplexParams(max_models_per_replica=3))
    # i1 holds no model: Ray's fallback picks it over i0 whatever its queue
    assert router.choose(fakes.request("c", "C"), insts, 0.0).name == "i1"


def test_multiplex_full_matching_replica_falls_back(fakes):
    insts = fleet(fakes, ["A", "B"], i0=4)
    router = MultiplexRouter(MultiplexParams(max_ongoing_requests=4))
    # i0 has A but does not accept: the fewest-models fallback, where i1 is less loaded
    assert router.choose(fakes.request("a", "A"), insts, 0.0).name == "i1"


def test_static_placement_keeps_start_models_and_pins_the_rest_by_first_arrival(fakes):
    insts = fleet(fakes, ["A", "B", None])
    router = StaticRouter()
    picks = [router.choose(fakes.request(m, m), insts, 0.0).name for m in "CBADCBAD"]
    # A and B stay where they start; C goes to the replica with no model, D then to i0
    assert picks == ["i2", "i1", "i0", "i0", "i2", "i1", "i0", "i0"]


def test_static_placement_follows_its_map_round_robin(fakes):
    insts = fleet(fakes, ["A", "B", "C"])
    router = StaticRouter(StaticParams(placement={"A": [0, 2], "B": [1]}))
    picks = [router.choose(fakes.request("a", "A"), insts, 0.0).name for _ in range(4)]
    assert picks == ["i0", "i2", "i0", "i2"]
    assert router.choose(fakes.request("b", "B"), insts, 0.0).name == "i1"


def test_static_placement_outside_the_replicas_fails_naming_the_model(fakes):
    insts = fleet(fakes, ["A", "B"])
    router = StaticRouter(StaticParams(placement={"A": [5]}))
    with pytest.raises(ValueError, match=r"placement.A: positions \[5\]"):
        router.choose(fakes.request("a", "A"), insts, 0.0)


def test_routers_registered_with_their_params():
    assert isinstance(ROUTERS.create("multiplex", {"max_models_per_replica": 2}), MultiplexRouter)
    with pytest.raises(ValueError, match="max_models_per_replica"):
        ROUTERS.create("multiplex", {"max_models_per_replica": 0})
    assert isinstance(ROUTERS.create("static", {"placement": {"A": [0]}}), StaticRouter)
