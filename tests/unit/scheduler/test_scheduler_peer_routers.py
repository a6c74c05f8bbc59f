"""The peers' routers as their sources state them: Ray Serve's power of two choices, Ray Serve
LLM's prefix-cache affinity and llm-d's weighted scorers (one table per rule)."""

from __future__ import annotations

import dataclasses
import random

import pytest

from services.scheduler.core.routers import ROUTERS
from services.scheduler.core.routers.llm_d_scorers import (
    LlmdScorerParams,
    LlmdScorerRouter,
    queue_scores,
)
from services.scheduler.core.routers.pow2 import Pow2Params, Pow2Router, draw_two, least_ongoing
from services.scheduler.core.routers.pow2_prefix import Pow2PrefixRouter
from shared.domain.prefix import PromptPrefix


def _with_prefix(req, tokens: list[int]):
    return dataclasses.replace(req, prefix=PromptPrefix.from_token_ids(tokens, 4))


@pytest.mark.parametrize(
    ("loads", "limit", "want"),
    [
        ((3, 1), None, 1),  # fewer ongoing wins
        ((2, 2), None, 0),  # tie: the first drawn
        ((5, 1), 2, 1),  # the first is full (>= limit): the other accepts
        ((4, 6), 2, 0),  # none accepts: the less loaded of both
    ],
)
def test_pow2_least_ongoing(fakes, loads, limit, want) -> None:
    insts = [fakes.instance(f"i{k}", waiting=q) for k, q in enumerate(loads)]
    assert least_ongoing(insts, limit) is insts[want]


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_pow2_draws_distinct_replicas(fakes, n) -> None:
    insts = [fakes.instance(f"i{k}") for k in range(n)]
    rng = random.Random(1)
    seen = set()
    for _ in range(200):
        pair = draw_two(rng, insts)
        assert len(pair) == min(n, 2) and len({i.name for i in pair}) == len(pair)
        seen.update(i.name for i in pair)
    assert seen == {i.name for i in insts}  # every replica gets drawn


def test_pow2_never_picks_the_most_loaded_of_three(fakes) -> None:
    insts = [
        fakes.instance("a", running=1),
        fakes.instance("b", running=9),
        fakes.instance("c", running=2),
    ]
    router = Pow2Router(Pow2Params(seed=3))
    picks = {router.choose(fakes.request(), insts, 0.0).name for _ in range(100)}
    assert picks == {"a", "c"}  # b is never the lesser of any pair


def test_pow2_is_seeded(fakes) -> None:
    insts = [fakes.instance(f"i{k}") for k in range(5)]
    runs = [
        [Pow2Router(Pow2Params(seed=7)).choose(fakes.request(), insts, 0.0).name for _ in range(1)]
        for _ in range(2)
    ]
    assert runs[0] == runs[1]


@pytest.mark.parametrize(
    ("placed", "loads", "tokens", "want"),
    [
        # a prompt matching replica a's cache: a, whatever its load
        ({"a": list(range(16))}, (5, 0), list(range(16)), "a"),
        # nothing matches (< 10%): the replica holding the fewest blocks
        ({"a": list(range(16))}, (0, 5), [99] * 16, "b"),
        # equal matches: the fewer ongoing requests
        ({"a": list(range(8)), "b": list(range(8))}, (3, 1), list(range(8)), "b"),
    ],
)
def test_pow2_prefix_candidates(fakes, placed, loads, tokens, want) -> None:
    router = Pow2PrefixRouter()
    insts = [fakes.instance("a", running=loads[0]), fakes.instance("b", running=loads[1])]
    for name, toks in placed.items():
        inst = next(i for i in insts if i.name == name)
        router.index.set_capacity(inst.name, 1 << 20)
        router.index.record_placement(inst.name, _with_prefix(fakes.request(), toks))
    assert router.choose(_with_prefix(fakes.request(), tokens), insts, 0.0).name == want


def test_pow2_prefix_imbalance_falls_back_to_pow2(fakes) -> None:
    router = ROUTERS.create("pow2-prefix", {"imbalanced_threshold": 2})
    insts = [fakes.instance("a", running=9), fakes.instance("b", running=0)]
    router.index.set_capacity("a", 1 << 20)
    req = _with_prefix(fakes.request(), list(range(16)))
    router.index.record_placement("a", req)
    assert router.choose(req, insts, 0.0).name == "b"  # spread 9 > 2: prefix ignored


@pytest.mark.parametrize(
    ("waiting", "want"),
    [((0, 0), [1.0, 1.0]), ((0, 4), [1.0, 0.0]), ((2, 4, 6), [1.0, 0.5, 0.0])],
)
def test_llm_d_queue_scorer(waiting, want) -> None:
    assert queue_scores(waiting) == want


@pytest.mark.parametrize(
    ("a", "b", "prefix_on", "want"),
    [
        # a: 4 waiting, b: 0 -> queue 0 vs 1 (x2); kv equal
        ({"waiting": 4}, {}, None, "b"),
        # equal queues; b's KV is 90% used: kv 1.0 vs 0.1 (x2)
        ({}, {"kv_used_blocks": 90}, None, "a"),
        # a holds the whole prompt: prefix 1 vs 0 (x3) beats b's queue advantage (x2)
        ({"waiting": 4}, {}, "a", "a"),
    ],
)
def test_llm_d_scorers_weighted_argmax(fakes, a, b, prefix_on, want) -> None:
    router = LlmdScorerRouter(LlmdScorerParams())
    insts = [fakes.instance("a", **a), fakes.instance("b", **b)]
    req = _with_prefix(fakes.request(), list(range(16)))
    if prefix_on:
        router.index.set_capacity(prefix_on, 1 << 20)
        router.index.record_placement(prefix_on, req)
    assert router.choose(req, insts, 0.0).name == want


def test_llm_d_scores_equation(fakes) -> None:
    router = LlmdScorerRouter(LlmdScorerParams(queue_weight=1, kv_cache_weight=1, prefix_weight=1))
    insts = [fakes.instance("a", waiting=2, kv_used_blocks=50), fakes.instance("b", waiting=0)]
    assert router.scores(fakes.request(), insts) == [0.0 + 0.5 + 0.0, 1.0 + 1.0 + 0.0]


def test_routers_without_params_refuse_them() -> None:
    with pytest.raises(ValueError, match="router 'round-robin' takes no params"):
        ROUTERS.create("round-robin", {"seed": 1})
    with pytest.raises(ValueError, match="seed"):
        ROUTERS.create("pow2", {"seed": -1})
