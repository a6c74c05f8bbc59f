"""What a replica sends of vLLM's response, and when: the pieces of an `Exchange`
(asgi_call.py) regrouped into fewer messages.

Every message a replica sends costs CPU in the replica and the ingress (a protobuf message,
a gRPC frame, a pass through each side's stream relay) on cores the engines share, and vLLM's
streaming handlers send one server-sent event per engine step and request. So, as the replica's
engine streams do (streaming.py), the body is regrouped, never changed (the bytes the client
reads are vLLM's, in order):
- everything up to and including what vLLM sends for the request's first engine output (the
  status line and headers, the role chunk, the first token, an error) goes out at once: time
  to first token is what SLOs and admission watch;
- the status line and headers wait for the body's first bytes (vLLM's streaming handlers send
  them when the request enters the engine, its first token one prefill later): one message
  carries both, or the next heartbeat carries them when no body comes;
- after it, what vLLM sends is gathered until the next tick of a clock of period `interval_s`
  that every stream of the replica shares (`next_tick`: at most one message per tick, so one
  per `interval_s` after the first of them), and the response's end goes out as soon as vLLM
  is done (`last`: the replica puts it on the final chunk with the counts). Streams in flight
  together send on the same ticks, so their messages leave in the same turn of the event loop
  and share the gRPC messages of the caller's `Streams` call (stream_mux.py);
- after `heartbeat_s` without a message an empty one goes out, so the caller's idle timeout
  tells a silent replica from a busy one (a queued request, a response that is not streamed).
`interval_s` 0 sends whatever has gathered at each wake-up.
With `accept_s`, the first message goes out within that time whatever it carries (an empty
one, or the status and headers alone, when nothing more came): the caller takes the first
message as the replica's accept.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from services.replica.asgi_call import Exchange, ResponseStart


def next_tick(after_s: float, interval_s: float) -> float:
    """The first tick after `after_s` of the clock of period `interval_s` (> 0) that every
    stream of a replica shares: the multiples of `interval_s` on the streams' clock."""
    return (math.floor(after_s / interval_s) + 1) * interval_s


@dataclass(frozen=True)
class Piece:
    """One message's worth of the response; all fields empty: a heartbeat."""

    start: ResponseStart | None
    body: bytes
    output_tokens: int
    """The request's output tokens so far (all choices), when this piece was taken."""
    last: bool = False
    """The response is complete after this piece."""


async def pieces(
    exchange: Exchange,
    output_tokens: Callable[[], int],
    interval_s: float,
    heartbeat_s: float,
    clock: Callable[[], float] = time.monotonic,
    accept_s: float | None = None,
) -> AsyncIterator[Piece]:
    """The response of `exchange` regrouped as the module docstring says; ends after the piece
    with `last` set. An exception of the application comes after what preceded it."""
    first_tokens = 0
    """Output tokens when the first piece carrying tokens went out (0: none yet)."""
    last_sent = clock()
    held: ResponseStart | None = None
    """The response's start, waiting for the body's first bytes."""
    accept_by = None if accept_s is None else last_sent + accept_s
    """When the first message is due (None: sent, or no limit)."""
    while True:
        wait_s = heartbeat_s if accept_by is None else max(0.0, accept_by - clock())
        if not await exchange.wait(min(wait_s, heartbeat_s)):
            yield Piece(held, b"", output_tokens())
            held = accept_by = None
            last_sent = clock()
            continue
        if interval_s > 0 and 0 < first_tokens < output_tokens():
            left = next_tick(last_sent, interval_s) - clock()
            if left > 0:  # gather until the tick or the response's end
                await exchange.wait(left, end_only=True)
        taken = exchange.take()
        tokens = output_tokens()
        start = next((e for e in taken if isinstance(e, ResponseStart)), held)
        body = b"".join(e for e in taken if isinstance(e, bytes))
        last = exchange.complete
        if not body and not last:
            held = start
            continue
        held = accept_by = None
        if tokens and not first_tokens:
            first_tokens = tokens
        last_sent = clock()
        yield Piece(start, body, tokens, last)
        if last:
            return
