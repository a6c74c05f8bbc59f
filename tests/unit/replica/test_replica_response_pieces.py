"""`pieces`: vLLM's response regrouped into the replica's messages. Everything up to the first
engine output's events goes out at once, later events are gathered (never changed, never
reordered) until the interval is over or the response ends, silence becomes heartbeats, and
the application's exception comes after what it sent before it."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from services.replica.asgi_call import Exchange
from services.replica.response_pieces import Piece, next_tick, pieces


class _Streamer:
    """An ASGI app sending SSE-like events; `tokens` plays the engine's output count."""

    def __init__(self, events: list[tuple[int, bytes, float]], fail: bool = False) -> None:
        self.events = events
        """(output tokens after it, body piece, seconds to wait before it)."""
        self.fail = fail
        self.tokens = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for tokens, body, gap in self.events:
            await asyncio.sleep(gap)
            self.tokens = tokens
            await send({"type": "http.response.body", "body": body, "more_body": True})
        if self.fail:
            raise RuntimeError("engine died")
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _pieces(app: _Streamer, interval_s: float, heartbeat_s: float = 60.0) -> list[Piece]:
    exchange = Exchange(app, "POST", "/v1/chat/completions", [], b"{}")
    t0 = time.monotonic()  # the shared clock starts here: its first tick is interval_s away
    clock = lambda: time.monotonic() - t0  # noqa: E731
    try:
        return [
            p async for p in pieces(exchange, lambda: app.tokens, interval_s, heartbeat_s, clock)
        ]
    finally:
        await exchange.close()


def _events(n: int) -> list[tuple[int, bytes, float]]:
    # the role chunk and the first token come from the first engine output, then one per step
    first = [(1, b"role;", 0.0), (1, b"t1;", 0.0)]
    return first + [(k, b"t%d;" % k, 0.001) for k in range(2, n + 1)]


def test_first_output_at_once_then_gathered_until_the_end() -> None:
    out = asyncio.run(_pieces(_Streamer(_events(20)), interval_s=60.0))
    # with an interval longer than the answer: the first output's events (one or two
    # messages), then everything after it in the last message
    assert out[0].start is not None and out[0].start.status == 200
    assert b"".join(p.body for p in out[:-1]) == b"role;t1;"
    assert out[-1].last and out[-1].body == b"".join(b"t%d;" % k for k in range(2, 21))
    assert out[-1].output_tokens == 20 and not any(p.last for p in out[:-1])


def test_interval_zero_sends_every_wake_up_and_keeps_the_bytes() -> None:
    out = asyncio.run(_pieces(_Streamer(_events(20)), interval_s=0.0))
    assert b"".join(p.body for p in out) == b"role;" + b"".join(b"t%d;" % k for k in range(1, 21))
    assert len(out) >= 19  # the steps sleep between events: one message each at least
    assert [p.last for p in out].count(True) == 1 and out[-1].last


def test_silence_becomes_heartbeats() -> None:
    # a second of silence at a 0.1 s heartbeat: two beats at the least even on a loaded host,
    # whose event loop may run late by a few hundred milliseconds
    app = _Streamer([(1, b"t1;", 1.0)])
    out = asyncio.run(_pieces(app, interval_s=0.0, heartbeat_s=0.1))
    beats = [p for p in out if p.start is None and not p.body and not p.last]
    assert len(beats) >= 2
    assert b"".join(p.body for p in out) == b"t1;"


def test_the_apps_exception_comes_after_what_it_sent() -> None:
    app = _Streamer(_events(3), fail=True)
    got: list[Piece] = []

    async def run() -> None:
        exchange = Exchange(app, "POST", "/", [], b"")
        try:
            async for p in pieces(exchange, lambda: app.tokens, 60.0, 60.0):
                got.append(p)
        finally:
            await exchange.close()

    with pytest.raises(RuntimeError, match="engine died"):
        asyncio.run(run())
    assert b"".join(p.body for p in got) == b"role;t1;t2;t3;"


def test_the_start_waits_for_the_first_body_bytes() -> None:
    # vLLM's streaming handler sends its status and headers when the request enters the
    # engine and the role chunk one prefill later: one message carries both
    events = [(1, b"role;", 0.05), (1, b"t1;", 0.0), (2, b"t2;", 0.001)]
    out = asyncio.run(_pieces(_Streamer(events), interval_s=60.0))
    assert out[0].start is not None and out[0].start.status == 200
    assert out[0].body.startswith(b"role;")
    assert [p.start is not None for p in out].count(True) == 1
    assert b"".join(p.body for p in out) == b"role;t1;t2;"


def test_a_heartbeat_carries_a_start_that_no_body_followed() -> None:
    app = _Streamer([(1, b"t1;", 0.35)])
    out = asyncio.run(_pieces(app, interval_s=0.0, heartbeat_s=0.1))
    assert out[0].start is not None and out[0].body == b"" and not out[0].last
    assert [p.start is not None for p in out].count(True) == 1
    assert b"".join(p.body for p in out) == b"t1;"


def test_streams_gather_until_the_ticks_of_one_shared_clock() -> None:
    # two streams whose last messages went out at different times send their next ones on
    # the same tick (one turn of the replica's loop, one message of the Streams call) ...
    assert next_tick(0.013, 0.05) == pytest.approx(0.05)
    assert next_tick(0.041, 0.05) == pytest.approx(0.05)
    # ... and a message sent on a tick waits a whole period for the next one
    assert next_tick(0.0502, 0.05) == pytest.approx(0.1)
    assert next_tick(123.4567, 0.05) == pytest.approx(123.5)
