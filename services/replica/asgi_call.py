"""One HTTP request through an ASGI application in-process, its response as a stream.

The replica runs vLLM's OpenAI application (vllm/openai_app.py) without a socket: the ingress's
call arrives over gRPC and goes to the application here. `call` yields the response's start
(status and headers) and then its body in the pieces the application sends. Closing the stream
early tells the application the client went away (`http.disconnect`, which vLLM's streaming
responses watch) and cancels it, so the engine aborts the request.
"""

from __future__ import annotations

import asyncio
import contextlib
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


_DONE = object()


async def call(
    app: ASGIApp,
    method: str,
    path: str,
    headers: Sequence[tuple[str, str]],
    body: bytes,
) -> AsyncIterator[ResponseStart | bytes]:
    """`method path` with `headers` and `body` through `app`: a ResponseStart, then bytes."""
    raw_path, _, query = path.partition("?")
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
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
    events: asyncio.Queue[object] = asyncio.Queue()
    gone = asyncio.Event()
    sent_body = False

    async def receive() -> dict[str, Any]:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            pairs = tuple(
                (bytes(k).decode("latin-1"), bytes(v).decode("latin-1"))
                for k, v in message.get("headers", ())
            )
            events.put_nowait(ResponseStart(int(message["status"]), pairs))
        elif kind == "http.response.body":
            chunk = bytes(message.get("body", b""))
            if chunk:
                events.put_nowait(chunk)
            if not message.get("more_body", False):
                events.put_nowait(_DONE)

    async def run() -> None:
        try:
            await app(scope, receive, send)
        except Exception as exc:  # handed to the consumer in order
            events.put_nowait(exc)
        finally:
            events.put_nowait(_DONE)

    task = asyncio.get_running_loop().create_task(run())
    try:
        while True:
            item = await events.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item  # type: ignore[misc]
    finally:
        gone.set()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
