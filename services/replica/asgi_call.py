"""One HTTP request through an ASGI application in-process, its response as it is sent.

The replica runs vLLM's OpenAI application (vllm/openai_app.py) without a socket: the ingress's
call arrives over gRPC and goes to the application here. An `Exchange` runs the application
(in a task made in the caller's context, so context variables reach it) and gathers what it
sends: the response's start (status and headers), then its body pieces. The consumer takes
whatever has gathered at each wake-up (`wait`, `take`), not one piece per loop turn: a
streamed response sends one piece per engine step and per request, and a task and a wake-up
per piece cost more than the piece. Closing the exchange before the response is complete tells
the application the client went away (`http.disconnect` to whatever waits on `receive`, an
OSError from `send`, as ASGI's HTTP spec 2.4 has it) and cancels it, so the engine aborts the
request. The scope says spec 2.4: a Starlette streaming response then streams in the request's
own task instead of a task group with a second task listening for the disconnect (a task group,
two tasks and a cancel scope per response, on the cores the engine shares); vLLM's handlers
still watch `receive` for the disconnect. `call` is the same as a plain stream of events.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

ASGIApp = Callable[
    [dict[str, Any], Callable[[], Awaitable[dict[str, Any]]], Callable[..., Awaitable[None]]],
    Awaitable[None],
]


@dataclass(frozen=True)
class ResponseStart:
    """The response's status line and headers."""

    status: int
    headers: tuple[tuple[str, str], ...]


def _scope(method: str, path: str, headers: Sequence[tuple[str, str]]) -> dict[str, Any]:
    raw_path, _, query = path.partition("?")
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": raw_path,
        "raw_path": raw_path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers],
        "server": ("slomesh-replica", 80),
        "client": ("127.0.0.1", 0),
        "state": {},
    }


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class ClientGone(OSError):
    """`send` after the exchange was closed (ASGI 2.4: the server's OSError of a closed
    connection)."""


class Exchange:
    """`method path` with `headers` and `body` through `app`, started at once (module
    docstring). Events come out of `take` in the order the application sent them; an exception
    of the application comes after what it sent before it."""

    def __init__(
        self,
        app: ASGIApp,
        method: str,
        path: str,
        headers: Sequence[tuple[str, str]],
        body: bytes,
    ) -> None:
        self._events: deque[ResponseStart | bytes | BaseException] = deque()
        self._complete = False
        """The application sent its last body piece, returned or failed."""
        self._waiter: asyncio.Future[None] | None = None
        self._waiting_for_end = False
        self._gone = asyncio.Event()
        self._body: bytes | None = body
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._run(app, _scope(method, path, headers)))

    @property
    def complete(self) -> bool:
        """Everything the application will send has been taken."""
        return self._complete and not self._events

    def ready(self) -> bool:
        """Something is waiting to be taken, or the response is complete."""
        return bool(self._events) or self._complete

    async def wait(self, timeout_s: float | None = None, end_only: bool = False) -> bool:
        """Until `ready()` (True) or `timeout_s` passed (False; None: no limit); with
        `end_only`, until the application is done (what it sends meanwhile waits)."""
        done = self._complete if end_only else self.ready()
        if done:
            return True
        waiter = self._waiter = self._loop.create_future()
        self._waiting_for_end = end_only
        timer = self._loop.call_later(timeout_s, _wake, waiter) if timeout_s is not None else None
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()
        return self._complete if end_only else self.ready()

    def take(self) -> list[ResponseStart | bytes]:
        """What the application sent since the last take; the application's exception is
        raised once what came before it was taken."""
        out: list[ResponseStart | bytes] = []
        while self._events:
            item = self._events[0]
            if isinstance(item, BaseException):
                if out:
                    return out
                self._events.popleft()
                raise item
            out.append(item)
            self._events.popleft()
        return out

    async def close(self) -> None:
        """Tell the application the client left and cancel it (no-op once it returned)."""
        self._gone.set()
        if not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    def _put(self, item: ResponseStart | bytes | BaseException) -> None:
        self._events.append(item)
        if self._waiter is not None and not self._waiting_for_end:
            _wake(self._waiter)

    def _end(self) -> None:
        self._complete = True
        if self._waiter is not None:
            _wake(self._waiter)

    async def _receive(self) -> dict[str, Any]:
        if self._body is not None:
            body, self._body = self._body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: dict[str, Any]) -> None:
        if self._gone.is_set():
            raise ClientGone("the caller closed the exchange")
        if self._complete:
            return
        kind = message["type"]
        if kind == "http.response.start":
            pairs = tuple(
                (bytes(k).decode("latin-1"), bytes(v).decode("latin-1"))
                for k, v in message.get("headers", ())
            )
            self._put(ResponseStart(int(message["status"]), pairs))
        elif kind == "http.response.body":
            chunk = bytes(message.get("body", b""))
            if chunk:
                self._put(chunk)
            if not message.get("more_body", False):
                self._end()

    async def _run(self, app: ASGIApp, scope: dict[str, Any]) -> None:
        try:
            await app(scope, self._receive, self._send)
        except Exception as exc:  # handed to the consumer in order
            if not self._complete:
                self._put(exc)
        finally:
            self._end()


async def call(
    app: ASGIApp,
    method: str,
    path: str,
    headers: Sequence[tuple[str, str]],
    body: bytes,
) -> AsyncIterator[ResponseStart | bytes]:
    """`method path` with `headers` and `body` through `app`: a ResponseStart, then bytes."""
    exchange = Exchange(app, method, path, headers, body)
    try:
        while not exchange.complete:
            await exchange.wait()
            for item in exchange.take():
                yield item
    finally:
        await exchange.close()
