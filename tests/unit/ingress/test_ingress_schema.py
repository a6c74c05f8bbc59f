"""Request models: what parses, how it is normalised, and the error for what does not."""

from __future__ import annotations

import json
from typing import Any

import pytest

from services.ingress.core import (
    APIError,
    ChatCompletionRequest,
    CompletionRequest,
    SLOObject,
    parse_body,
)


def completion(**fields: Any) -> CompletionRequest:
    return parse_body(json.dumps({"model": "m", "prompt": "p", **fields}), CompletionRequest)


def chat(**fields: Any) -> ChatCompletionRequest:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields}
    return parse_body(json.dumps(body), ChatCompletionRequest)


@pytest.mark.parametrize(
    ("prompt", "expected"), [("hello", "hello"), (["hello"], "hello"), ("", "")]
)
def test_ingress_prompt_forms(prompt: str | list[str], expected: str) -> None:
    assert completion(prompt=prompt).prompt == expected


@pytest.mark.parametrize(
    ("prompt", "fragment"),
    [
        (["a", "b"], "n>1 prompts not supported"),
        ([], "empty list"),
        ([[1, 2, 3]], "token-id prompts"),
        ([1, 2, 3], "token-id prompts"),
        (None, "valid string"),
    ],
)
def test_ingress_prompt_rejected(prompt: Any, fragment: str) -> None:
    with pytest.raises(APIError) as info:
        completion(prompt=prompt)
    assert (info.value.status, info.value.param) == (400, "prompt")
    assert fragment in info.value.message


def test_ingress_unknown_fields_are_ignored() -> None:
    req = chat(logprobs=False, frequency_penalty=0.5, seed=3, tools=[], response_format={})
    assert req.model == "m"
    assert not hasattr(req, "seed")


@pytest.mark.parametrize(
    ("fields", "attr", "expected"),
    [
        ({"stop": "END"}, "stop", ["END"]),
        ({"stop": ["a", "b"]}, "stop", ["a", "b"]),
        ({"slo": " chat "}, "slo", "chat"),
        ({"slo": {"ttft_ms": 100}}, "slo", SLOObject(ttft_ms=100)),
        ({"temperature": 0}, "temperature", 0.0),
        ({"top_p": 1}, "top_p", 1.0),
        ({"priority": -7}, "priority", -7),
        ({"max_completion_tokens": 9}, "requested_max_tokens", 9),
        ({"max_tokens": 8}, "requested_max_tokens", 8),
        ({}, "requested_max_tokens", None),
        ({"stream": True}, "include_usage", False),
        ({"stream": True, "stream_options": {"include_usage": True}}, "include_usage", True),
    ],
)
def test_ingress_chat_fields_normalised(fields: dict[str, Any], attr: str, expected: Any) -> None:
    assert getattr(chat(**fields), attr) == expected


@pytest.mark.parametrize(
    ("fields", "param", "fragment"),
    [
        ({"stop": ["1", "2", "3", "4", "5"]}, "stop", "at most 4"),
        ({"stop": 5}, "stop", "valid list"),
        ({"n": 3}, "n", "only n=1"),
        ({"stream_options": {"include_usage": True}}, "stream_options", "stream is true"),
        (
            {"stream": True, "stream_options": {"include_usage": "yes"}},
            "stream_options.include_usage",
            "valid boolean",
        ),
        ({"max_tokens": 3, "max_completion_tokens": 4}, "max_completion_tokens", "conflicts"),
        ({"slo": ""}, "slo", "must not be empty"),
        ({"slo": {}}, "slo", "at least one of ttft_ms"),
        ({"slo": {"ttft_ms": True}}, "slo.ttft_ms", "valid number"),
        ({"model": ""}, "model", "at least 1 character"),
        ({"user": 5}, "user", "valid string"),
        ({"messages": [{"role": "user"}]}, "messages[0].content", "Field required"),
        ({"messages": [{"role": "user", "content": None}]}, "messages[0].content", "valid string"),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": 1}]}]},
            "messages[0].content",
            "part 0: 'text' must be a string",
        ),
        ({"messages": [{"role": "user", "content": ["raw"]}]}, "messages[0].content", "got 'str'"),
        ({"messages": "hi"}, "messages", "valid list"),
    ],
)
def test_ingress_chat_field_errors(fields: dict[str, Any], param: str, fragment: str) -> None:
    with pytest.raises(APIError) as info:
        chat(**fields)
    err = info.value
    assert (err.status, err.param, err.type) == (400, param, "invalid_request_error")
    assert err.message.startswith(f"{param}: ")
    assert fragment in err.message


@pytest.mark.parametrize("raw", ["", "{", '{"model": "m", }', "nul"])
def test_ingress_malformed_json(raw: str) -> None:
    with pytest.raises(APIError) as info:
        parse_body(raw, ChatCompletionRequest)
    assert info.value.status == 400
    assert info.value.param is None
    assert info.value.message.startswith("request body is not valid JSON: ")


def test_ingress_nan_literal_is_rejected() -> None:
    with pytest.raises(APIError, match="temperature: Input should be a finite number"):
        parse_body('{"model": "m", "prompt": "p", "temperature": NaN}', CompletionRequest)


def test_ingress_several_errors_are_counted() -> None:
    with pytest.raises(APIError) as info:
        parse_body('{"max_tokens": -1}', CompletionRequest)
    assert info.value.param == "model"
    assert info.value.message.endswith("(and 2 more errors)")


def test_ingress_assistant_content_may_be_null() -> None:
    req = chat(messages=[{"role": "assistant", "content": None}, {"role": "tool", "content": "x"}])
    assert [m.content for m in req.messages] == ["", "x"]
