"""Serve's HTTP proxy's own plain-text error answers become OpenAI's error JSON
(services/ingress/proxy_errors.py), headers kept; JSON answers and streams pass untouched."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from services.ingress.proxy_errors import OpenAIErrorBodies, proxy_middlewares


def _app(
    status: int, body: bytes, content_type: bytes | None, extra: list[Any] | None = None
) -> Any:
    headers = [(b"content-type", content_type)] if content_type else []
    headers += extra or []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": status, "headers": headers})
        half = len(body) // 2  # in two parts, as a streaming sender may
        await send({"type": "http.response.body", "body": body[:half], "more_body": True})
        await send({"type": "http.response.body", "body": body[half:]})

    return app


def _run(app: Any) -> tuple[int, dict[bytes, bytes], bytes]:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    asyncio.run(OpenAIErrorBodies(app)({"type": "http"}, receive, send))
    start = sent[0]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], {bytes(k).lower(): bytes(v) for k, v in start["headers"]}, body


RETRY = [(b"retry-after", b"1")]


@pytest.mark.parametrize(
    ("status", "text", "ctype", "extra", "want_type", "want_code", "drop"),
    [
        (
            429,
            b"Request dropped due to backpressure (num_queued_requests=32)",
            b"text/plain; charset=utf-8",
            RETRY,
            "rate_limit_exceeded",
            "rate_limit_exceeded",
            b"ingress-queue-full",
        ),
        (
            503,
            b"Request dropped due to backpressure",
            b"text/plain; charset=utf-8",
            RETRY,
            "server_error",
            "server_overloaded",
            b"unavailable",
        ),
        (
            500,
            b"Internal Server Error",
            b"text/plain; charset=utf-8",
            [],
            "server_error",
            "internal_error",
            None,
        ),
        (502, b"Bad Gateway", None, [], "server_error", "proxy_error", None),
        (
            408,
            b"Request abc timed out after 5s.",
            b"text/plain",
            [],
            "server_error",
            "timeout",
            None,
        ),
        (
            404,
            b"Path '/x' not found.",
            b"text/plain",
            [],
            "invalid_request_error",
            "not_found",
            None,
        ),
    ],
)
def test_plain_text_errors_become_openai_json(
    status: int,
    text: bytes,
    ctype: bytes | None,
    extra: list[Any],
    want_type: str,
    want_code: str,
    drop: bytes | None,
) -> None:
    got_status, headers, body = _run(_app(status, text, ctype, extra))
    assert got_status == status
    assert headers[b"content-type"] == b"application/json"
    assert headers[b"content-length"] == str(len(body)).encode()
    error = json.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == want_type and error["code"] == want_code
    assert text.decode() in error["message"]
    for k, v in extra:
        assert headers[k] == v  # Retry-After kept
    assert headers.get(b"x-slomesh-drop-reason") == drop


@pytest.mark.parametrize(
    ("status", "body", "ctype"),
    [
        (
            429,
            b'{"error": {"message": "ours", "type": "rate_limit_exceeded"}}',
            b"application/json",
        ),
        (200, b"data: {}\n\ndata: [DONE]\n\n", b"text/event-stream"),
        (200, b"plain text answer", b"text/plain"),  # not an error
    ],
)
def test_other_answers_pass_untouched(status: int, body: bytes, ctype: bytes) -> None:
    got_status, headers, got = _run(_app(status, body, ctype))
    assert (got_status, headers[b"content-type"], got) == (status, ctype, body)


def test_the_proxy_callback_returns_starlette_middleware() -> None:
    from ray.serve._private.http_util import validate_http_proxy_callback_return

    (middleware,) = validate_http_proxy_callback_return(proxy_middlewares())
    assert middleware.cls is OpenAIErrorBodies


def test_slomesh_up_points_the_proxy_at_this_callback() -> None:
    from ray.serve._private.http_util import validate_http_proxy_callback_return
    from ray.serve._private.utils import call_function_from_import_path

    from slomesh.launch.mesh import MESH_PROCESS_ENV

    path = MESH_PROCESS_ENV["RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH"]
    (middleware,) = validate_http_proxy_callback_return(call_function_from_import_path(path))
    assert middleware.cls is OpenAIErrorBodies
    assert MESH_PROCESS_ENV["RAY_worker_niceness"] == "0"
