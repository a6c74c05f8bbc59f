"""The HTTP side of the ingress shell: the FastAPI app's OpenAPI document, body reading with a
size limit, and the error handling that keeps every answer in OpenAI's error shape.

- **OpenAPI.** The handlers parse raw bodies themselves (so every message is ours, never
  FastAPI's 422), which leaves FastAPI nothing to document. `completion_route_docs` describes
  each route's request body (the pydantic models of `core/openai_schema.py`, added to
  `components.schemas` by `IngressAPI.openapi`), its SLO headers and its error responses.
- **Errors.** `CatchAllMiddleware` answers any exception that escapes a route with OpenAI's 500
  body (and swallows it, so no server above answers a plain-text 500); the app's exception
  handlers put the framework's own errors (unknown path 404, wrong method 405) in the same shape.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI
from fastapi import Request as HTTPRequest
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.ingress.core.errors import (
    APIError,
    ErrorResponse,
    bad_request,
    body_too_large,
    http_error,
    internal_error,
)
from services.ingress.core.openai_schema import openapi_schemas
from services.ingress.core.slo import SLOLimits

log = logging.getLogger("slomesh.ingress")


class OpenAIErrorJSON(JSONResponse):
    """JSONResponse rendered with ASCII escapes: a body holding a lone surrogate (echoed
    input) still encodes instead of failing with a 500."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def error_response(err: APIError, headers: dict[str, str] | None = None) -> JSONResponse:
    """OpenAI's error JSON with the error's status and headers (Retry-After, ...)."""
    return OpenAIErrorJSON(
        err.body(), status_code=err.status, headers={**(headers or {}), **err.headers()}
    )


async def read_body(request: HTTPRequest, max_body_bytes: int) -> bytes:
    """The request body, or 413 once it is known to exceed `max_body_bytes`: from a
    Content-Length header before reading anything, else while it streams in."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_body_bytes:
        raise body_too_large(int(declared), max_body_bytes)
    parts: list[bytes] = []
    size = 0
    async for part in request.stream():
        size += len(part)
        if size > max_body_bytes:
            raise body_too_large(-1, max_body_bytes)
        parts.append(part)
    return b"".join(parts)


class IngressAPI(FastAPI):
    """FastAPI whose OpenAPI document also holds the request-body schemas the routes reference
    and the optional bearer-key scheme."""

    def openapi(self) -> dict[str, Any]:
        if self.openapi_schema is None:
            schema = super().openapi()
            components = schema.setdefault("components", {})
            components.setdefault("schemas", {}).update(openapi_schemas())
            components["securitySchemes"] = {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "API key; required only when the ingress has keys "
                    "configured with required: true",
                }
            }
        return self.openapi_schema  # type: ignore[return-value]  # set by super().openapi()


_LIMITS = SLOLimits()
_SLO_HEADERS = [
    {
        "name": name,
        "in": "header",
        "required": False,
        "description": f"{what} objective in milliseconds, used when the body has no `slo` "
        "(range: the default SLOLimits; the deployment's `slo.limits` may differ)",
        "schema": {"type": "number", "minimum": low, "maximum": high},
    }
    for name, what, low, high in (
        ("x-slo-ttft-ms", "time-to-first-token", _LIMITS.min_ttft_ms, _LIMITS.max_ttft_ms),
        ("x-slo-tpot-ms", "time-per-output-token", _LIMITS.min_tpot_ms, _LIMITS.max_tpot_ms),
    )
]

_SSE_EVENT = {  # one server-sent event
    "type": "object",
    "properties": {
        "data": {
            "type": "string",
            "description": "a chunk (chat.completion.chunk / text_completion) as JSON, OpenAI's "
            "error JSON if the stream fails, or [DONE] last",
        },
        "event": {"type": "string"},
    },
    "required": ["data"],
}

_ERROR_STATUSES = {
    400: "Invalid request: the message names the field and the rule (bad JSON, a field of the "
    "wrong type or range, invalid Unicode, nesting over max_json_depth, prompt + max_tokens "
    "over the context)",
    401: "Missing or invalid API key (only when keys are configured)",
    403: "Above the caller's entitlement (band, TTFT or TPOT); the message names the field "
    "and the limit",
    404: "Unknown model; the message lists the served models",
    413: "Body over max_body_bytes",
    429: "Admission rejected this request for now; retry after Retry-After seconds",
    500: "Unexpected server fault",
    503: "The mesh is saturated or a service is unreachable; Retry-After when known",
}


def error_docs() -> dict[int | str, dict[str, Any]]:
    """The error responses every OpenAI route may answer, for its OpenAPI document."""
    return {
        status: {"model": ErrorResponse, "description": description}
        for status, description in _ERROR_STATUSES.items()
    }


def completion_route_docs(body_model: str) -> dict[str, Any]:
    """`openapi_extra` and `responses` for a POST route whose JSON body is `body_model` (a
    schema of `openapi_schemas()`): keyword arguments for FastAPI's route decorator."""
    responses: dict[int | str, dict[str, Any]] = {
        200: {
            "description": "The completion: one JSON object, or server-sent events of chunks "
            "ending with `data: [DONE]` when `stream` is true",
            "content": {"text/event-stream": {"schema": _SSE_EVENT}},
        }
    }
    for status, description in _ERROR_STATUSES.items():
        responses[status] = {"model": ErrorResponse, "description": description}
    extra = {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": f"#/components/schemas/{body_model}"}}
            },
        },
        "parameters": _SLO_HEADERS,
        "security": [{}, {"bearer": []}],
    }
    return {"openapi_extra": extra, "responses": responses}


class CatchAllMiddleware:
    """ASGI middleware: an exception escaping the app becomes OpenAI's 500 JSON when no response
    has started (logged, then swallowed); after the start it can only be logged."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            log.exception("unexpected error serving %s %s", scope.get("method"), scope["path"])
            if not started:
                await error_response(internal_error(exc))(scope, receive, send)


async def _http_exception(request: HTTPRequest, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 404:
        message = f"unknown path {request.url.path}; the API is under /v1"
    elif exc.status_code == 405:
        message = f"method {request.method} is not allowed on {request.url.path}"
    else:
        message = str(exc.detail)
    return error_response(http_error(exc.status_code, message), dict(exc.headers or {}))


async def _validation_exception(request: HTTPRequest, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    first = errors[0] if errors else {}
    loc = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or None
    return error_response(bad_request(loc, str(first.get("msg", "invalid request"))))


async def _unexpected_exception(request: HTTPRequest, exc: Exception) -> JSONResponse:
    log.error("unexpected error serving %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(internal_error(exc))


def install_error_handling(app: FastAPI) -> None:
    """OpenAI-shaped answers for every error of `app`: the framework's HTTP errors, request
    validation, and unexpected exceptions (the catch-all middleware and, behind it, the
    app's Exception handler)."""
    app.add_exception_handler(StarletteHTTPException, _http_exception)
    app.add_exception_handler(RequestValidationError, _validation_exception)
    app.add_exception_handler(Exception, _unexpected_exception)
    app.add_middleware(CatchAllMiddleware)
