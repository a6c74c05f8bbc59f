"""Static batching: padded prefill, whole-batch completion, iteration-limited slices, KV caps."""

from __future__ import annotations

import pytest

from services.replica.core.outputs import StepKind


def batch_starts(trace):
    """Steps that start a batch: every chunk prefills its whole context from nothing."""
    return [
        s
        for s in trace.steps
        if s.plan.kind is StepKind.EXECUTE
        and all(c.computed_before == 0 and c.num_tokens > 1 for c in s.chunks)
    ]


def test_replica_static_batch_pads_and_finishes_together(h):
    profile = h.profile(4096)
    core = h.core(profiles={"m": profile}, mode="static", static_batch_size=4, block_size_tokens=1)
    reqs = [h.request("a", 10, 4), h.request("b", 30, 7), h.request("c", 20, 2)]
    trace = h.drive(core, reqs)
    first = trace.steps[0]
    assert sorted(c.rid for c in first.chunks) == ["a", "b", "c"]
    assert first.plan.duration_s == pytest.approx(profile.prefill_time_s(3, 30))
    # 1 prefill + 6 decode iterations (the longest needs 7 tokens), each over all 3 padded slots
    assert len(trace.steps) == 7
    for k, step in enumerate(trace.steps[1:], start=1):
        assert step.plan.duration_s == pytest.approx(profile.decode_time_s(30 + k, 3))
    finish = {rid: s.finish_s for rid, s in trace.finished.items()}
    assert set(finish.values()) == {trace.steps[-1].plan.end_s}  # all at the batch end
    assert {s.first_token_s for s in trace.finished.values()} == {first.plan.end_s}
    assert {rid: s.num_output_tokens for rid, s in trace.finished.items()} == {
        "a": 4,
        "b": 7,
        "c": 2,
    }
    assert all(step.finished == [] for step in trace.steps[:-1])


@pytest.mark.parametrize(
    ("batch_size", "groups"),
    [(2, [["r0", "r1"], ["r2", "r3"], ["r4"]]), (5, [["r0", "r1", "r2", "r3", "r4"]])],
)
def test_replica_static_batch_size(h, batch_size, groups):
    core = h.core(4096, mode="static", static_batch_size=batch_size)
    reqs = [h.request(f"r{k}", 8 + k, 3 + k, arrival=0.0) for k in range(5)]
    trace = h.drive(core, reqs)
    starts = batch_starts(trace)
    assert [sorted(c.rid for c in s.chunks) for s in starts] == groups
    for group in groups:  # each batch finishes together
        assert len({trace.finished[rid].finish_s for rid in group}) == 1


@pytest.mark.parametrize(("limit", "slices"), [(4, 3), (5, 2), (10, 1), (None, 1)])
def test_replica_static_iteration_limit_requeues(h, limit, slices):
    profile = h.profile(4096)
    core = h.core(
        profiles={"m": profile}, mode="static", static_iteration_limit=limit, block_size_tokens=1
    )
    trace = h.drive(core, [h.request("long", 12, 10), h.request("short", 6, 3)])
    long, short = trace.finished["long"], trace.finished["short"]
    assert long.num_output_tokens == 10 and trace.emitted["long"] == 10
    assert short.num_output_tokens == 3
    starts = [s for s in batch_starts(trace) if any(c.rid == "long" for c in s.chunks)]
    assert len(starts) == slices
    if slices > 1:
        assert short.finish_s < long.finish_s
        assert long.finish_s > starts[1].plan.start_s  # finished in a later batch
        # the next slice re-prefills the whole context (prompt + tokens generated so far)
        chunk = next(c for c in starts[1].chunks if c.rid == "long")
        assert chunk.num_tokens == 12 + limit
        assert starts[1].plan.duration_s == pytest.approx(profile.prefill_time_s(1, 12 + limit))


def test_replica_static_batch_limited_by_kv(h):
    # 1-token blocks, 100 tokens: each request reserves 20 + 20; two fit (80), three do not (120)
    core = h.core(100, mode="static", static_batch_size=8, block_size_tokens=1)
    reqs = [h.request(f"r{k}", 20, 20, arrival=0.0) for k in range(4)]
    trace = h.drive(core, reqs)
    assert [len(s.chunks) for s in batch_starts(trace)] == [2, 2]
    assert sorted(trace.finished) == ["r0", "r1", "r2", "r3"]


def test_replica_static_batch_memory_check_counts_blocks(h):
    """The padded-batch memory check counts whole blocks, not tokens."""
    # 10 blocks of 16 = 160 tokens; 3 x (20 + 33) = 159 tokens would pass a token check, but each
    # request needs ceil(53 / 16) = 4 blocks: only two fit (8 <= 10), the third waits
    core = h.core(160, mode="static", static_batch_size=8, block_size_tokens=16)
    reqs = [h.request(f"r{k}", 20, 33) for k in range(3)]
    trace = h.drive(core, reqs)
    assert [len(s.chunks) for s in batch_starts(trace)] == [2, 1]
    assert sorted(trace.finished) == ["r0", "r1", "r2"]
