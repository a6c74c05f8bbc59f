"""`with_heartbeats`: a silent stretch of the replica's response becomes empty chunks, items keep
their order, context variables reach the source's steps, closing closes the source."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator

from services.replica.openai_serving import with_heartbeats

MARK: contextvars.ContextVar[str] = contextvars.ContextVar("mark", default="")


async def _source(gaps_s: list[float], seen: list[str], closed: list[bool]) -> AsyncIterator[int]:
    try:
        for i, gap in enumerate(gaps_s):
            await asyncio.sleep(gap)
            seen.append(MARK.get())
            yield i
    finally:
        closed.append(True)


def test_silence_becomes_heartbeats_and_items_keep_order() -> None:
    async def run() -> tuple[list[int | None], list[str], list[bool]]:
        seen: list[str] = []
        closed: list[bool] = []
        MARK.set("request-1")
        out = [x async for x in with_heartbeats(_source([0.0, 0.35, 0.0], seen, closed), 0.1)]
        return out, seen, closed

    out, seen, closed = asyncio.run(run())
    assert [x for x in out if x is not None] == [0, 1, 2]
    assert out.index(1) - out.index(0) - 1 >= 2  # at least two heartbeats in 0.35 s at 0.1 s
    assert seen == ["request-1"] * 3 and closed == [True]


def test_closing_early_closes_the_source() -> None:
    async def run() -> list[bool]:
        closed: list[bool] = []
        stream = with_heartbeats(_source([0.0, 10.0], [], closed), 0.05)
        assert await anext(stream) == 0
        assert await anext(stream) is None  # the source is still waiting
        await stream.aclose()
        return closed

    assert asyncio.run(run()) == [True]
