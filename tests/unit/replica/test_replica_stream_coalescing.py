"""The replica's stream coalescing (services/replica/streaming.py): first token and end at once,
tokens in between gathered per interval, nothing lost or reordered, closing aborts upstream."""

from __future__ import annotations

import asyncio

import pytest

from services.replica.engine import TokenChunk, coalesce
from services.replica.streaming import coalesced


def _chunk(n: int, finished: bool = False) -> TokenChunk:
    return TokenChunk(
        "r",
        [n] if n else [],
        f"t{n}" if n else "",
        n,
        float(n),
        finished,
        "length" if finished else None,
    )


class _Clock:
    """A manual clock the fake engine advances (no real waiting)."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


async def _engine(
    clock: _Clock, steps: list[tuple[float, TokenChunk | Exception]], closed: list[bool]
):
    try:
        for gap, item in steps:
            clock.t += gap
            for _ in range(10):  # event-loop turns: the consumer catches up at every step
                await asyncio.sleep(0)
            if isinstance(item, Exception):
                raise item
            yield item
    finally:
        closed.append(True)


def _collect(steps, interval_s):
    clock, closed = _Clock(), []

    async def go():
        return [c async for c in coalesced(_engine(clock, steps, closed), interval_s, clock)]

    return asyncio.run(go()), closed


def test_coalesce_concatenates_in_order_and_keeps_the_latest_state():
    out = coalesce([_chunk(1), _chunk(2), _chunk(3, finished=True)])
    assert (out.token_ids, out.text, out.num_output_tokens, out.finished, out.finish_reason) == (
        [1, 2, 3],
        "t1t2t3",
        3,
        True,
        "length",
    )
    assert coalesce([_chunk(4)]) == _chunk(4)


@pytest.mark.parametrize(
    ("gaps_s", "interval_s", "messages"),
    [
        # 10 tokens 2 ms apart, 10 ms interval: first at once, then one per interval, end at once
        ([0.002] * 10, 0.010, [[1], [2, 3, 4, 5, 6], [7, 8, 9, 10]]),
        # tokens slower than the interval: each goes out on its own
        ([0.020] * 4, 0.010, [[1], [2], [3], [4]]),
        # interval 0: one message per engine output
        ([0.002] * 4, 0.0, [[1], [2], [3], [4]]),
    ],
)
def test_messages_per_interval(gaps_s, interval_s, messages):
    steps = [(g, _chunk(i + 1, finished=i == len(gaps_s) - 1)) for i, g in enumerate(gaps_s)]
    out, closed = _collect(steps, interval_s)
    assert [c.token_ids for c in out] == messages
    assert out[-1].finished and out[-1].num_output_tokens == len(gaps_s)
    assert "".join(c.text for c in out) == "".join(f"t{i + 1}" for i in range(len(gaps_s)))
    assert closed == [True]


def test_an_empty_first_chunk_does_not_count_as_the_first_token():
    steps = [(0.001, _chunk(0)), (0.001, _chunk(1)), (0.001, _chunk(2, finished=True))]
    out, _ = _collect(steps, 0.010)
    assert [c.num_output_tokens for c in out] == [1, 2]


def test_an_engine_error_comes_after_the_tokens_before_it():
    steps = [(0.001, _chunk(1)), (0.001, _chunk(2)), (0.001, RuntimeError("engine died"))]
    clock, closed = _Clock(), []
    got: list[TokenChunk] = []

    async def go():
        async for c in coalesced(_engine(clock, steps, closed), 0.010, clock):
            got.append(c)

    with pytest.raises(RuntimeError, match="engine died"):
        asyncio.run(go())
    assert [t for c in got for t in c.token_ids] == [1, 2]


def test_closing_the_stream_early_closes_the_engine_stream():
    steps = [(0.001, _chunk(i + 1)) for i in range(100)]
    clock, closed = _Clock(), []

    async def go():
        gen = coalesced(_engine(clock, steps, closed), 0.010, clock)
        first = await anext(gen)
        await gen.aclose()
        return first

    first = asyncio.run(go())
    assert first.token_ids == [1]
    assert closed == [True]
