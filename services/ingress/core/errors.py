"""OpenAI-shaped API errors raised by the ingress core and rendered by the shell.

Every client-visible failure is an `APIError`: an HTTP status, a message that names the offending
field and the rule it broke, and OpenAI's error body::

    {"error": {"message": "...", "type": "invalid_request_error", "param": "n", "code": null}}

The gRPC shell maps the same object to a status code (400 -> INVALID_ARGUMENT, 401 ->
UNAUTHENTICATED, 404 -> NOT_FOUND, 429/503 -> RESOURCE_EXHAUSTED/UNAVAILABLE).
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import ValidationError

INVALID_REQUEST = "invalid_request_error"


class APIError(Exception):
    """A request failure with an HTTP status and OpenAI's error body.

    status: HTTP status code (400, 401, 404, 429, 500, 503, ...).
    message: human-readable text; names the field and the rule when a field is at fault.
    type: OpenAI error type ("invalid_request_error", "server_error", ...).
    param: the offending request field path ("max_tokens", "messages[0].content"), or None.
    code: machine-readable code ("model_not_found", "context_length_exceeded", ...), or None.
    retry_after_s: when set, the client should retry after this many seconds (Retry-After).
    """

    def __init__(
        self,
        status: int,
        message: str,
        type: str = INVALID_REQUEST,
        param: str | None = None,
        code: str | None = None,
        retry_after_s: float | None = None,
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
    return APIError(400, f"request body is not valid JSON: {detail}", INVALID_REQUEST, None, None)


def unauthorized(message: str = "invalid or missing API key") -> APIError:
    """401 for a missing or unknown API key (the key itself is never echoed)."""
    return APIError(401, message, INVALID_REQUEST, None, "invalid_api_key")


def model_not_found(model: str, served: list[str]) -> APIError:
    """404 for a model this mesh does not serve; the message lists the served models."""
    listed = ", ".join(sorted(served)) or "(none)"
    return APIError(
        404,
        f"model: the model '{model}' does not exist; served models: {listed}",
        INVALID_REQUEST,
        "model",
        "model_not_found",
    )


def overloaded(message: str, retry_after_s: float, *, status: Literal[429, 503] = 429) -> APIError:
    """429 rate_limit_exceeded (this request cannot be admitted now) or 503 server_overloaded (the
    mesh as a whole is saturated), both with Retry-After."""
    if status == 429:
        return APIError(
            429, message, "rate_limit_exceeded", None, "rate_limit_exceeded", retry_after_s
        )
    return APIError(503, message, "server_error", None, "server_overloaded", retry_after_s)


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
