"""Serve's HTTP proxy answers some requests itself, before the ingress runs: 429/503 when the
ingress's queue is full (`max_queued_at_proxy`, the cheapest rejection there is), 503 while no
ingress replica is up, 500 when the proxy fails, 404 for a path no application serves, 408 on
its request timeout. Those bodies are Serve's plain text. This ASGI middleware, run inside the
proxy (`slomesh up` sets `RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH` to `proxy_middlewares`),
rewrites each plain-text error into OpenAI's error JSON with the same status and headers
(Retry-After kept), so a client sees one error shape whoever answered. Answers of the ingress
itself (already JSON) and successful bodies pass through untouched.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

DROP_REASON_HEADER = b"x-slomesh-drop-reason"

# status -> (type, code, drop reason): OpenAI's types (rate_limit_exceeded, server_error, ...)
_SHAPES: dict[int, tuple[str, str, str | None]] = {
    404: ("invalid_request_error", "not_found", None),
    408: ("server_error", "timeout", None),
    429: ("rate_limit_exceeded", "rate_limit_exceeded", "ingress-queue-full"),
    500: ("server_error", "internal_error", None),
    503: ("server_error", "server_overloaded", "unavailable"),
}


def openai_error_body(status: int, text: str) -> bytes:
    """OpenAI's error JSON for a proxy answer with `status` and plain-text body `text`."""
    kind, code, _ = _SHAPES.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", "proxy_error", None)
    )
    message = f"{text.strip() or 'error'} (answered by the HTTP proxy)"
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return json.dumps(body, separators=(",", ":")).encode()


def _is_plain_error(message: Message) -> bool:
    if message["status"] < 400:
        return False
    for key, value in message.get("headers") or []:
        if bytes(key).lower() == b"content-type":
            return bytes(value).lower().startswith(b"text/plain")
    return True  # an error without a content type is the proxy's too


class OpenAIErrorBodies:
    """ASGI middleware: the proxy's plain-text error answers become OpenAI's error JSON."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        held: Message | None = None
        chunks: list[bytes] = []

        async def rewriting_send(message: Message) -> None:
            nonlocal held
            kind = message["type"]
            if kind == "http.response.start" and _is_plain_error(message):
                held = message  # sent with the rewritten body once that is complete
                return
            if held is None or kind != "http.response.body":
                await send(message)
                return
            chunks.append(bytes(message.get("body", b"")))
            if message.get("more_body", False):
                return
            status = int(held["status"])
            body = openai_error_body(status, b"".join(chunks).decode("utf-8", "replace"))
            headers = [
                (bytes(k), bytes(v))
                for k, v in held.get("headers") or []
                if bytes(k).lower() not in (b"content-type", b"content-length")
            ]
            headers += [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ]
            drop = _SHAPES.get(status, ("", "", None))[2]
            if drop and not any(k.lower() == DROP_REASON_HEADER for k, _ in headers):
                headers.append((DROP_REASON_HEADER, drop.encode()))
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, rewriting_send)


def proxy_middlewares() -> list[Any]:
    """Serve's HTTP proxy callback (`RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH`): the middlewares
    it runs around every request."""
    from starlette.middleware import Middleware

    return [Middleware(OpenAIErrorBodies)]
