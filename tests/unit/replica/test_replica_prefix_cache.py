"""The simulated engine's prefix cache: only the uncached suffix is prefilled; LRU eviction."""

from __future__ import annotations

import dataclasses

import pytest

from services.replica.core.prefix_cache import PrefixCache
from shared.domain.prefix import PromptPrefix

B = 16


def with_prefix(req, segments, reply=None):
    prefix = PromptPrefix.from_segments(segments, B, reply)
    assert sum(n for _, n in segments) == req.input_tokens
    return dataclasses.replace(req, prefix=prefix)


def prefilled_tokens(trace, rid):
    """Prompt tokens the engine computed for `rid` (its prefill chunks)."""
    return sum(
        c.num_tokens
        for s in trace.steps
        for c in s.chunks
        if c.rid == rid and c.outputs_before == 0
    )


@pytest.mark.parametrize(
    ("first", "second", "expected_prefill"),
    [
        ([(1, 160)], [(1, 160), (2, 40)], 40),  # shared 10 blocks: only the 40-token suffix
        ([(1, 100)], [(1, 100), (2, 60)], 64),  # 6 full blocks shared (96 tokens): 160 - 96
        ([(1, 160)], [(9, 160), (2, 40)], 200),  # another system prompt: nothing shared
        ([(1, 160)], [(1, 160)], 1),  # identical prompt: the last token is always computed
    ],
)
def test_replica_prefix_hit_prefills_only_the_suffix(h, first, second, expected_prefill):
    core = h.core(4096)
    a = with_prefix(h.request("a", sum(n for _, n in first), 4), first)
    b = with_prefix(h.request("b", sum(n for _, n in second), 4, arrival=5.0), second)
    trace = h.drive(core, [a, b])
    assert prefilled_tokens(trace, "a") == a.input_tokens
    assert prefilled_tokens(trace, "b") == expected_prefill
    cache = core.planner.state.prefix_cache
    assert cache is not None
    assert cache.hit_tokens == b.input_tokens - expected_prefill
    assert cache.prompt_tokens == a.input_tokens + b.input_tokens


def test_replica_prefix_reply_blocks_are_cached_when_the_request_finishes(h):
    core = h.core(4096)
    reply = (7, 48)
    a = with_prefix(h.request("a", 160, 48), [(1, 160)], reply)
    # the next turn re-sends the reply: 160 + 48 = 208 tokens = 13 blocks cached
    b = with_prefix(h.request("b", 240, 4, arrival=100.0), [(1, 160), reply, (8, 32)])
    trace = h.drive(core, [a, b])
    assert prefilled_tokens(trace, "b") == 240 - 208


def test_replica_prefix_cache_off_and_static_engines_prefill_everything(h):
    for core in (h.core(4096, prefix_caching=False), h.core(4096, mode="static")):
        a = with_prefix(h.request("a", 160, 4), [(1, 160)])
        b = with_prefix(h.request("b", 160, 4, arrival=5.0), [(1, 160)])
        trace = h.drive(core, [a, b])
        assert prefilled_tokens(trace, "b") >= 160
        assert core.planner.state.prefix_cache is None


def test_replica_prefix_hit_shortens_the_time_to_first_token(h):
    def ttft(caching: bool) -> float:
        core = h.core(8192, prefix_caching=caching)
        a = with_prefix(h.request("a", 2000, 2), [(1, 2000)])
        b = with_prefix(h.request("b", 2100, 2, arrival=10.0), [(1, 2000), (2, 100)])
        seq_b = h.drive(core, [a, b]).finished["b"]
        return seq_b.first_token_s - 10.0

    assert ttft(True) < 0.5 * ttft(False)


@pytest.mark.parametrize(
    ("capacity", "inserted", "looked_up", "hit_blocks"),
    [
        (4, [[1, 2, 3, 4]], [1, 2, 3, 4], 4),
        (3, [[1, 2, 3, 4]], [1, 2, 3, 4], 0),  # block 1 (LRU) evicted: nothing leads
        (4, [[1, 2], [5, 6], [1, 2], [7, 8]], [1, 2], 2),  # 1, 2 re-used: 5, 6 go first
        (4, [[1, 2], [5, 6], [7, 8]], [1, 2], 0),
        (0, [[1, 2]], [1, 2], 0),
    ],
)
def test_replica_prefix_cache_lru_bounded_by_capacity(h, capacity, inserted, looked_up, hit_blocks):
    cache = PrefixCache(capacity)
    for k, hashes in enumerate(inserted):
        req = h.request(f"r{k}", 64, 1)
        cache.insert(dataclasses.replace(req, prefix=PromptPrefix(B, tuple(hashes))))
    probe = h.request("p", 1000, 1)
    hit = cache.lookup(dataclasses.replace(probe, prefix=PromptPrefix(B, tuple(looked_up))))
    assert hit == hit_blocks * B
    assert len(cache) <= capacity
