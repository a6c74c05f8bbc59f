"""asgi_call.call: one request through an ASGI app in process; the response's start, its body
pieces as sent, the app's exception in order, and an early close tells the app the client left
and cancels it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from services.replica.asgi_call import ResponseStart, call


async def _echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    message = await receive()
    headers = [(b"content-type", b"text/plain"), (b"x-path", scope["path"].encode())]
    await send({"type": "http.response.start", "status": 201, "headers": headers})
    for piece in (scope["method"].encode(), b"|", scope["query_string"], b"|", message["body"]):
        await send({"type": "http.response.body", "body": piece, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _collect(app: Any, path: str = "/v1/x?a=1", body: bytes = b"hi") -> list[Any]:
    return [e async for e in call(app, "POST", path, [("Content-Type", "a/b")], body)]


def test_start_then_body_pieces() -> None:
    events = asyncio.run(_collect(_echo))
    start = events[0]
    assert isinstance(start, ResponseStart) and start.status == 201
    assert ("x-path", "/v1/x") in start.headers
    assert events[1:] == [b"POST", b"|", b"a=1", b"|", b"hi"]  # empty pieces are not passed


def test_the_apps_exception_reaches_the_caller() -> None:
    async def failing(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        raise RuntimeError("boom")

    async def run() -> list[Any]:
        got: list[Any] = []
        with pytest.raises(RuntimeError, match="boom"):
            async for event in call(failing, "GET", "/", [], b""):
                got.append(event)
        return got

    assert [type(e) for e in asyncio.run(run())] == [ResponseStart]


def test_an_early_close_disconnects_and_cancels_the_app() -> None:
    seen: dict[str, Any] = {}

    async def streaming(scope: Any, receive: Any, send: Any) -> None:
        await receive()  # the body
        await send({"type": "http.response.start", "status": 200, "headers": []})

        async def watch() -> None:
            seen["disconnect"] = (await receive())["type"]

        watcher = asyncio.get_running_loop().create_task(watch())
        try:
            for i in range(1000):
                await send({"type": "http.response.body", "body": b"x%d" % i, "more_body": True})
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            seen["cancelled"] = True
            await asyncio.sleep(0)  # let the watcher see the disconnect
            watcher.cancel()
            raise

    async def run() -> list[Any]:
        stream = call(streaming, "POST", "/", [], b"")
        got = [await anext(stream), await anext(stream)]
        await stream.aclose()
        return got

    got = asyncio.run(run())
    assert got[1] == b"x0"
    assert seen == {"cancelled": True, "disconnect": "http.disconnect"}


def test_a_streaming_response_streams_without_a_disconnect_listener() -> None:
    """The scope says ASGI spec 2.4: Starlette's StreamingResponse sends from the request's
    own task and never calls `receive` to listen for a disconnect (spec 2.3 starts a task group
    with a listener per response)."""
    from starlette.responses import StreamingResponse

    receives = []

    async def pieces() -> Any:
        for piece in (b"data: 1\n\n", b"data: 2\n\n"):
            yield piece

    async def app(scope: Any, receive: Any, send: Any) -> None:
        async def counted() -> Any:
            receives.append(1)
            return await receive()

        response = StreamingResponse(pieces(), media_type="text/event-stream")
        await response(scope, counted, send)

    events = asyncio.run(_collect(app))
    assert isinstance(events[0], ResponseStart) and events[0].status == 200
    assert events[1:] == [b"data: 1\n\n", b"data: 2\n\n"]
    assert receives == []


def test_send_after_the_caller_left_raises_an_oserror() -> None:
    """ASGI 2.4: a send on a closed exchange raises (an OSError), so an application that
    catches the cancellation learns the client is gone instead of streaming on."""
    from services.replica.asgi_call import Exchange

    seen: dict[str, Any] = {}

    async def stubborn(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            try:
                await send({"type": "http.response.body", "body": b"late", "more_body": True})
            except OSError as err:
                seen["error"] = type(err).__name__

    async def run() -> None:
        exchange = Exchange(stubborn, "GET", "/", [], b"")
        await exchange.wait()
        await exchange.close()

    asyncio.run(run())
    assert seen == {"error": "ClientGone"}
