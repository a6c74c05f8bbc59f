"""APIError shape, headers and the helper constructors."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field, ValidationError

from services.ingress.core.errors import (
    APIError,
    bad_request,
    context_too_long,
    field_path,
    from_validation_error,
    invalid_json,
    model_not_found,
    overloaded,
    unauthorized,
)


@pytest.mark.parametrize(
    ("err", "status", "type_", "param", "code"),
    [
        (
            bad_request("max_tokens", "must be >= 1"),
            400,
            "invalid_request_error",
            "max_tokens",
            None,
        ),
        # code "invalid_json": the shell tells a body that is not JSON (forwarded: vLLM
        # answers it) from the ingress's own hostile-input rules
        (invalid_json("boom"), 400, "invalid_request_error", None, "invalid_json"),
        (unauthorized(), 401, "invalid_request_error", None, "invalid_api_key"),
        # vLLM's own 404 for a model it does not serve (type, param and the numeric code)
        (model_not_found("x", ["b", "a"]), 404, "NotFoundError", "model", 404),
        (overloaded("busy", 2.0), 429, "rate_limit_exceeded", None, "rate_limit_exceeded"),
        (overloaded("busy", 2.0, status=503), 503, "server_error", None, "server_overloaded"),
        (
            context_too_long("prompt", 10, 5, 12),
            400,
            "invalid_request_error",
            "prompt",
            "context_length_exceeded",
        ),
    ],
)
def test_ingress_error_helpers(
    err: APIError, status: int, type_: str, param: str | None, code: str | int | None
) -> None:
    assert err.status == status
    assert err.body() == {
        "error": {"message": err.message, "type": type_, "param": param, "code": code}
    }
    assert str(err) == err.message


def test_ingress_error_messages_name_the_field() -> None:
    assert bad_request("max_tokens", "must be >= 1").message == "max_tokens: must be >= 1"
    assert bad_request(None, "body is empty").message == "body is empty"
    assert invalid_json("boom").message == "request body is not valid JSON: boom"
    # vLLM's words, the served names as its valid aliases
    assert model_not_found("x", ["b", "a"]).message == (
        "The model `x` does not exist. Valid aliases: b, a."
    )
    assert (
        "15 tokens (10 in the prompt, 5 in the completion)"
        in context_too_long("prompt", 10, 5, 12).message
    )


@pytest.mark.parametrize(
    ("retry_after_s", "expected"),
    [
        (None, {}),
        (0.0, {"Retry-After": "0"}),
        (0.2, {"Retry-After": "1"}),
        (3.0, {"Retry-After": "3"}),
        (3.01, {"Retry-After": "4"}),
    ],
)
def test_ingress_retry_after_header(retry_after_s: float | None, expected: dict[str, str]) -> None:
    err = APIError(429, "slow down", "rate_limit_exceeded", retry_after_s=retry_after_s)
    assert err.headers() == expected


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_ingress_retry_after_must_be_sane(bad: float) -> None:
    with pytest.raises(ValueError, match="retry_after_s"):
        APIError(503, "x", retry_after_s=bad)


@pytest.mark.parametrize(
    ("loc", "expected"),
    [
        (("max_tokens",), "max_tokens"),
        (("messages", 0, "content"), "messages[0].content"),
        (("slo", "ttft_ms"), "slo.ttft_ms"),
        ((3, "a"), "[3].a"),
        ((), ""),
    ],
)
def test_ingress_field_path(loc: tuple[int | str, ...], expected: str) -> None:
    assert field_path(loc) == expected


class _Body(BaseModel):
    max_tokens: int = Field(gt=0)
    name: str = "x"


@pytest.mark.parametrize(
    ("data", "param", "message"),
    [
        ({"max_tokens": 0}, "max_tokens", "max_tokens: Input should be greater than 0"),
        ({}, "max_tokens", "max_tokens: Field required"),
        ({"max_tokens": 1, "name": 3}, "name", "name: Input should be a valid string"),
        (
            {"max_tokens": "x", "name": 3},
            "max_tokens",
            "max_tokens: Input should be a valid integer, unable to parse string as an integer "
            "(and 1 more error)",
        ),
    ],
)
def test_ingress_from_validation_error(data: dict[str, object], param: str, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        _Body.model_validate(data)
    err = from_validation_error(info.value)
    assert (err.status, err.param, err.message) == (400, param, message)
    assert err.body()["error"]["type"] == "invalid_request_error"
