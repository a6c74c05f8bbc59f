"""AsyncSimEngine on a VirtualClock: streaming, concurrency, early close, abort, evict/resume."""

from __future__ import annotations

import asyncio

import pytest

from services.replica.engine import EngineRequest
from services.replica.sim_engine import AsyncSimEngine
from shared.domain import VirtualClock
from shared.domain.engine import EngineConfig


def make_engine(h, capacity=1024, **config):
    clock = VirtualClock()
    engine = AsyncSimEngine(
        "e", {"m": h.profile(capacity)}, EngineConfig(**config), clock, active_model="m"
    )
    return engine, clock


def run(coro):
    """asyncio.run with a guard so that a lost wake-up fails the test instead of hanging it."""
    return asyncio.run(asyncio.wait_for(coro, timeout=30))


async def collect(engine, request):
    return [c async for c in engine.generate(EngineRequest(request))]


def check_stream(chunks, rid, n, reason):
    assert [c.num_output_tokens for c in chunks] == list(range(1, n + 1))
    assert all(c.request_id == rid and len(c.token_ids) == 1 for c in chunks)
    assert [c.finished for c in chunks] == [False] * (n - 1) + [True]
    assert chunks[-1].finish_reason == reason
    assert all(c.finish_reason is None for c in chunks[:-1])
    times = [c.time_s for c in chunks]
    assert times == sorted(times) and times[0] > 0


@pytest.mark.parametrize(
    ("true_tokens", "max_tokens", "reason"), [(5, 5, "length"), (3, 8, "stop"), (1, 1, "length")]
)
def test_replica_async_stream(h, true_tokens, max_tokens, reason):
    async def main():
        engine, clock = make_engine(h)
        req = h.request("a", 20, true_tokens, max_tokens=max_tokens)
        chunks = await collect(engine, req)
        await engine.shutdown()
        return engine, clock, chunks

    engine, clock, chunks = run(main())
    check_stream(chunks, "a", true_tokens, reason)
    assert clock.now() == chunks[-1].time_s
    assert engine.status().running == 0 and engine.core.planner.state.pool.used == 0


def test_replica_async_timing_matches_the_core(h):
    """Under a VirtualClock the async shell reproduces the core's step times exactly."""
    reqs = [h.request("a", 30, 6), h.request("b", 50, 4)]

    async def main():
        engine, _ = make_engine(h)
        out = await asyncio.gather(*(collect(engine, r) for r in reqs))
        await engine.shutdown()
        return out

    streams = run(main())
    trace = h.drive(h.core(1024), reqs)
    for r, chunks in zip(reqs, streams, strict=True):
        check_stream(chunks, r.request_id, r.true_output_tokens, "length")
        seq = trace.finished[r.request_id]
        assert chunks[0].time_s == pytest.approx(seq.first_token_s)
        assert chunks[-1].time_s == pytest.approx(seq.finish_s)


def test_replica_async_two_concurrent_generates(h):
    async def main():
        engine, _ = make_engine(h)
        a, b = await asyncio.gather(
            collect(engine, h.request("a", 40, 7)), collect(engine, h.request("b", 10, 12))
        )
        status = engine.status()
        await engine.shutdown()
        return a, b, status

    a, b, status = run(main())
    check_stream(a, "a", 7, "length")
    check_stream(b, "b", 12, "length")
    assert (status.running, status.waiting, status.kv_used_blocks) == (0, 0, 0)


def test_replica_async_closing_stream_early_aborts(h):
    async def main():
        engine, _ = make_engine(h)
        gen = engine.generate(EngineRequest(h.request("a", 40, 50)))
        seen = 0
        async for chunk in gen:
            seen = chunk.num_output_tokens
            if seen == 2:
                break
        kv = engine.core.planner.state
        assert kv.seqs["a"].gpu_blocks > 0  # still held until the stream is closed
        await gen.aclose()
        core = engine.core
        state = ("a" in kv.seqs, kv.pool.used, engine.status().running)
        # the engine keeps serving others
        other = await collect(engine, h.request("b", 10, 3))
        await engine.shutdown()
        return seen, state, other, core

    seen, state, other, core = run(main())
    assert seen == 2
    assert state == (False, 0, 0)
    check_stream(other, "b", 3, "length")
    assert core.status().outstanding_output_tokens == 0


def test_replica_async_abort_sends_final_chunk(h):
    async def main():
        engine, _ = make_engine(h)
        gen = engine.generate(EngineRequest(h.request("a", 40, 50)))
        first = await gen.__anext__()
        await engine.abort("a")
        await engine.abort("a")  # a second abort is a no-op
        await engine.abort("unknown")
        rest = [c async for c in gen]
        used = engine.core.planner.state.pool.used
        await engine.shutdown()
        return first, rest, used, engine

    first, rest, used, engine = run(main())
    assert first.num_output_tokens == 1 and not first.finished
    assert rest[-1].finished and rest[-1].finish_reason == "abort"
    assert rest[-1].token_ids == []
    assert all(not c.finished for c in rest[:-1])
    assert used == 0 and "a" not in engine.core.planner.state.seqs


def test_replica_async_abort_chunk_keeps_cumulative_count(h):
    async def main():
        engine, _ = make_engine(h)
        gen = engine.generate(EngineRequest(h.request("a", 40, 50)))
        await gen.__anext__()
        await engine.abort("a")
        rest = [c async for c in gen]
        await engine.shutdown()
        return rest

    rest = run(main())
    counts = [c.num_output_tokens for c in rest]
    assert counts[-1] >= max([1, *counts[:-1]])


def test_replica_async_evict_and_resume(h):
    async def main():
        engine, _ = make_engine(h)
        ga = engine.generate(EngineRequest(h.request("a", 30, 10)))
        head = [await ga.__anext__()]
        assert await engine.evict(["a"]) == ["a"]
        assert await engine.evict(["a"]) == []
        at_evict = engine.core.planner.state.evicted["a"].num_output_tokens
        b = await collect(engine, h.request("b", 20, 5))  # served while a is out
        st = engine.status()
        after_b = engine.core.planner.state.evicted["a"].num_output_tokens
        assert await engine.resume(["a"]) == ["a"]
        assert await engine.resume(["a"]) == []
        tail = [c async for c in ga]
        await engine.shutdown()
        return head, at_evict, b, st, after_b, tail

    head, at_evict, b, st, after_b, tail = run(main())
    check_stream(b, "b", 5, "length")
    assert (st.evicted, st.running, st.waiting) == (1, 0, 0)
    assert after_b == at_evict  # nothing generated while evicted
    chunks = head + tail
    # chunks queued before the eviction are still delivered; the count never skips or repeats
    check_stream(chunks, "a", 10, "length")


def test_replica_async_lagging_consumer_gets_coalesced_deltas(h):
    """A consumer that falls behind receives merged deltas; every token is still delivered."""
    engine, _ = make_engine(h)

    async def go():
        gen = engine.generate(EngineRequest(h.request("lag", 10, 12)))
        first = await gen.__anext__()
        for _ in range(50):  # let the engine run ahead while nobody reads
            await asyncio.sleep(0)
        rest = [c async for c in gen]
        return first, rest

    first, rest = run(go())
    assert first.num_output_tokens == 1
    assert len(rest) < 11  # fewer messages than tokens: some deltas were merged
    assert rest[-1].finished and rest[-1].num_output_tokens == 12
    delivered = len(first.token_ids) + sum(len(c.token_ids) for c in rest)
    assert delivered == 12
    counts = [c.num_output_tokens for c in rest]
    assert counts == sorted(counts)
