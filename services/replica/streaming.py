"""Coalescing an engine's output stream into fewer messages (tokens per message, not one
message per token).

Every message a replica sends costs CPU in three processes (the replica, the ingress, Serve's
proxy) that share the cores with the engine; at one message per engine step that relay slows
decoding itself on a small node. `coalesced` passes the first token on at once (time to first
token is what SLOs and admission watch) and the final chunk at once (the stream ends as soon as
the engine finishes), and gathers the tokens in between into at most one message per
`interval_s` (Ray Serve LLM's LLMServer batches its stream on a fixed 50 ms timer the same way).
interval_s = 0 sends whatever is ready at each wake-up: one message per engine step unless the
consumer fell behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable

from services.replica.engine import TokenChunk, coalesce

_END = object()


async def coalesced(
    chunks: AsyncIterator[TokenChunk],
    interval_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> AsyncIterator[TokenChunk]:
    """`chunks` regrouped as the module docstring says. Closing the result closes `chunks`
    (the engine aborts the request); an error of `chunks` comes after what preceded it."""
    if interval_s <= 0:
        async for chunk in chunks:
            yield chunk
        return
    queue: asyncio.Queue[object] = asyncio.Queue()

    async def read() -> None:
        try:
            async for chunk in chunks:
                queue.put_nowait(chunk)
        except Exception as exc:  # handed to the consumer after what came before it
            queue.put_nowait(exc)
        finally:
            queue.put_nowait(_END)

    reader = asyncio.get_running_loop().create_task(read())
    pending: list[TokenChunk] = []
    sent_tokens = False
    last_sent = clock()
    try:
        while True:
            item: object = None  # None: the interval ran out with tokens pending
            if pending:
                wait = max(last_sent + interval_s - clock(), 0.0)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):  # wait_for could swallow a cancel (3.11)
                        item = await queue.get()
            else:
                item = await queue.get()
            terminal = None
            while item is not None:  # this item and whatever else is ready
                if not isinstance(item, TokenChunk):
                    terminal = item
                    break
                pending.append(item)
                item = queue.get_nowait() if not queue.empty() else None
            first = not sent_tokens and any(c.num_output_tokens > 0 for c in pending)
            due = terminal is not None or first or clock() - last_sent >= interval_s
            if pending and (due or pending[-1].finished):
                out = coalesce(pending)
                pending = []
                sent_tokens = sent_tokens or out.num_output_tokens > 0
                last_sent = clock()
                yield out
            if isinstance(terminal, BaseException):
                raise terminal
            if terminal is _END:
                return
    finally:
        if not reader.done():
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            await aclose()  # a stream the reader never started is closed too
