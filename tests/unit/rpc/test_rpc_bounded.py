"""A bounded call (shared/rpc/bounded.py) gives up at its deadline even when the call does not
end when cancelled (a Serve handle call to a deleted application), and passes results and
failures through."""

from __future__ import annotations

import asyncio

import pytest

from shared.rpc.bounded import bounded


async def _stubborn(release: asyncio.Event) -> str:
    """Ignores cancellation until `release` is set."""
    while True:
        try:
            await release.wait()
            return "late"
        except asyncio.CancelledError:
            continue


def test_a_call_that_does_not_end_when_cancelled_still_times_out() -> None:
    async def run() -> None:
        release = asyncio.Event()
        with pytest.raises(TimeoutError):
            await bounded(_stubborn(release), 0.05)
        release.set()  # the abandoned call ends on its own
        await asyncio.sleep(0)

    asyncio.run(run())


def test_results_and_failures_pass_through() -> None:
    async def ok() -> int:
        return 7

    async def fail() -> int:
        raise ValueError("no")

    async def run() -> None:
        assert await bounded(ok(), 1.0) == 7
        with pytest.raises(ValueError, match="no"):
            await bounded(fail(), 1.0)

    asyncio.run(run())
