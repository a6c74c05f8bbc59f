"""OpenAI-shaped API errors raised by the ingress core and rendered by the shell.

Every client-visible failure is an `APIError`: an HTTP status, a message that names the offending
field and the rule it broke, and OpenAI's error body::

    {"error": {"message": "...", "type": "invalid_request_error", "param": "n", "code": null}}

The gRPC shell maps the same object to a status code (400 -> INVALID_ARGUMENT, 401 ->
UNAUTHENTICATED, 404 -> NOT_FOUND, 429/503 -> RESOURCE_EXHAUSTED/UNAVAILABLE). `ErrorResponse`
documents the shape in the OpenAPI schema.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

INVALID_REQUEST = "invalid_request_error"
DROP_REASON_HEADER = "x-slomesh-drop-reason"
"""Why a request was answered 429/503 under load (a short code; errors.overloaded)."""


class ErrorDetail(BaseModel):
    """The `error` object of OpenAI's error body (documents the shape in the OpenAPI schema)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    message: str
    """Human-readable text naming the field and the rule it broke."""
    type: str
    """OpenAI error type: invalid_request_error, rate_limit_exceeded, server_error, ..."""
    param: str | None
    """The offending request field path (e.g. "messages[0].content"), or null."""
    code: str | int | None
    """Machine-readable code: slomesh's own errors a string (e.g. "invalid_api_key"), vLLM's
    errors the HTTP status as an integer (as vLLM sends it), or null."""


class ErrorResponse(BaseModel):
    """OpenAI's error body: {"error": {message, type, param, code}}."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    error: ErrorDetail
    """What went wrong."""


class APIError(Exception):
    """A request failure with an HTTP status and OpenAI's error body.

    status: HTTP status code (400, 401, 404, 429, 500, 503, ...).
    message: human-readable text; names the field and the rule when a field is at fault.
    type: OpenAI error type ("invalid_request_error", "server_error", ...).
    param: the offending request field path ("max_tokens", "messages[0].content"), or None.
    code: machine-readable code ("model_not_found", "context_length_exceeded", ...), or None.
    retry_after_s: when set, the client should retry after this many seconds (Retry-After).
    drop_reason: why a request was dropped under load ("sheddable-saturated", "queue-full",
    ...), sent as the `x-slomesh-drop-reason` header.
    """

    def __init__(
        self,
        status: int,
        message: str,
        type: str = INVALID_REQUEST,
        param: str | None = None,
        code: str | int | None = None,
        retry_after_s: float | None = None,
        drop_reason: str | None = None,
    ) -> None:
        super().__init__(message)
        if retry_after_s is not None and not (math.isfinite(retry_after_s) and retry_after_s >= 0):
            raise ValueError(f"retry_after_s must be >= 0 and finite, got {retry_after_s}")
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.retry_after_s = retry_after_s
        self.drop_reason = drop_reason

    def body(self) -> dict[str, Any]:
        """OpenAI's error shape: {"error": {"message", "type", "param", "code"}}."""
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def headers(self) -> dict[str, str]:
        """Response headers: Retry-After (whole seconds, rounded up) when set; a Bearer challenge
        on 401."""
        out: dict[str, str] = {}
        if self.retry_after_s is not None:
            out["Retry-After"] = str(math.ceil(self.retry_after_s))
        if self.status == 401:
            out["WWW-Authenticate"] = "Bearer"
        if self.drop_reason:
            out[DROP_REASON_HEADER] = self.drop_reason
        return out

    def __repr__(self) -> str:
        return (
            f"APIError(status={self.status}, message={self.message!r}, type={self.type!r}, "
            f"param={self.param!r}, code={self.code!r}, retry_after_s={self.retry_after_s!r})"
        )


def bad_request(param: str | None, rule: str, code: str | None = None) -> APIError:
    """400 invalid_request_error whose message is "<param>: <rule>" (just the rule without one)."""
    message = f"{param}: {rule}" if param else rule
    return APIError(400, message, INVALID_REQUEST, param, code)


def invalid_json(detail: str) -> APIError:
    """400 for a body that does not parse as JSON."""
    return APIError(
        400, f"request body is not valid JSON: {detail}", INVALID_REQUEST, None, "invalid_json"
    )


def unauthorized(message: str = "invalid or missing API key") -> APIError:
    """401 for a missing or unknown API key (the key itself is never echoed)."""
    return APIError(401, message, INVALID_REQUEST, None, "invalid_api_key")


def model_not_found(model: str, served: list[str]) -> APIError:
    """404 for a model this mesh does not serve, in vLLM's words (its served names as the
    valid aliases)."""
    names = ", ".join(served)
    message = f"The model `{model}` does not exist. Valid aliases: {names}."
    return APIError(404, message, "NotFoundError", "model", 404)


def overloaded(
    message: str,
    retry_after_s: float,
    *,
    status: Literal[429, 503] = 429,
    drop_reason: str | None = None,
) -> APIError:
    """429 rate_limit_exceeded (this request cannot be admitted now) or 503 server_overloaded (the
    mesh as a whole is saturated), both with Retry-After, and `x-slomesh-drop-reason` when
    drop_reason is given."""
    if status == 429:
        return APIError(
            429,
            message,
            "rate_limit_exceeded",
            None,
            "rate_limit_exceeded",
            retry_after_s,
            drop_reason,
        )
    return APIError(
        503, message, "server_error", None, "server_overloaded", retry_after_s, drop_reason
    )


def scheduler_rejection(reason: str, retry_after_s: float, drop_reason: str) -> APIError:
    """The scheduler's rejection: 429 with its Retry-After when it gave one, else 503 (Retry-After
    1 s); its drop reason in `x-slomesh-drop-reason`."""
    status: Literal[429, 503] = 429 if retry_after_s > 0 else 503
    return overloaded(
        reason, max(retry_after_s, 1.0), status=status, drop_reason=drop_reason or None
    )


def context_too_long(
    param: Literal["messages", "prompt"],
    prompt_tokens: int,
    max_tokens: int | None,
    max_model_len: int,
) -> APIError:
    """400 context_length_exceeded: prompt + completion exceed the model's context.
    max_tokens None means the prompt alone fills the context."""
    if max_tokens is None:
        message = (
            f"This model's maximum context length is {max_model_len} tokens. However, your "
            f"{param} resulted in {prompt_tokens} tokens, leaving no room for the completion. "
            f"Please reduce the length of the {param}."
        )
    else:
        message = (
            f"This model's maximum context length is {max_model_len} tokens. However, you "
            f"requested {prompt_tokens + max_tokens} tokens ({prompt_tokens} in the {param}, "
            f"{max_tokens} in the completion). Please reduce the length of the {param} or "
            f"completion."
        )
    return APIError(400, message, INVALID_REQUEST, param, "context_length_exceeded")


def server_error(message: str) -> APIError:
    """500 for a fault on the server's side (e.g. misconfiguration), not the client's."""
    return APIError(500, message, "server_error", None, None)


def internal_error(exc: BaseException | None = None) -> APIError:
    """500 for an unexpected exception: names its type, never its text (which may echo input)."""
    kind = f" ({type(exc).__name__})" if exc is not None else ""
    return APIError(
        500,
        f"internal server error{kind}; see the ingress logs",
        "server_error",
        None,
        "internal_error",
    )


def body_too_large(size_bytes: int, limit_bytes: int) -> APIError:
    """413 for a request body over `max_body_bytes` (size_bytes -1: known only to exceed it)."""
    size = f"{size_bytes} bytes" if size_bytes >= 0 else "more"
    return APIError(
        413,
        f"request body: {size} is over the limit of {limit_bytes} bytes (max_body_bytes)",
        INVALID_REQUEST,
        None,
        "request_too_large",
    )


def json_too_deep(depth: int, limit: int) -> APIError:
    """400 for a JSON body nested deeper than `max_json_depth` arrays/objects."""
    return APIError(
        400,
        f"request body: JSON nested {depth} levels deep, over the limit of {limit} "
        "(max_json_depth)",
        INVALID_REQUEST,
        None,
        "json_too_deep",
    )


def invalid_unicode(param: str | None, rule: str) -> APIError:
    """400 for a string that is not valid Unicode (a lone surrogate or an invalid UTF-8 byte)."""
    return bad_request(param, rule, "invalid_unicode")


def http_error(status: int, message: str) -> APIError:
    """The web framework's own errors (unknown path 404, wrong method 405, ...) in OpenAI's
    shape; 5xx become server_error."""
    kind = "server_error" if status >= 500 else INVALID_REQUEST
    return APIError(status, message, kind, None, None)


def field_path(loc: tuple[int | str, ...]) -> str:
    """Render a pydantic error location as a field path: ("messages", 0, "content") ->
    "messages[0].content"."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def from_validation_error(err: ValidationError) -> APIError:
    """400 naming the first bad field: "max_tokens: Input should be greater than 0",
    param "max_tokens". Errors not tied to a field carry param None."""
    errors = err.errors(include_url=False)
    if not errors:
        return bad_request(None, "invalid request")
    first = errors[0]
    msg = str(first["msg"])
    if first["type"] == "value_error" and msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    path = field_path(tuple(first["loc"])) or None
    more = len(errors) - 1
    if more:
        msg += f" (and {more} more error{'s' if more > 1 else ''})"
    return bad_request(path, msg)
