"""A call bounded in time that never waits on its own cancellation.

`asyncio.wait_for` cancels an awaitable that ran out of time and then waits for it to finish
cancelling. A Serve handle call to an application that was just deleted may not finish for a
long while, which would hold whatever loop made the call (a shard's exchange loop, an ingress's
shard table refresh). `bounded` gives up at the deadline: the call is cancelled and left to end
on its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")


def _consume(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: no "exception was never retrieved" at exit


async def bounded(call: Awaitable[T], timeout_s: float) -> T:
    """`call`'s result, or TimeoutError once `timeout_s` seconds have passed (module doc)."""
    task = asyncio.ensure_future(call)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
    except asyncio.CancelledError:
        task.cancel()
        task.add_done_callback(_consume)
        raise
    if not done:
        task.cancel()
        task.add_done_callback(_consume)
        raise TimeoutError(f"no answer in {timeout_s:g} s")
    return task.result()
