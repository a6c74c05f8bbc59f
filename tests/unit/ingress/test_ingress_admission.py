"""Admission: model registry, max_tokens defaults and bounds, context length, priority."""

from __future__ import annotations

from typing import Any

import pytest

from services.ingress.core import (
    AdmissionConfig,
    APIError,
    ChatCompletionRequest,
    CompletionRequest,
    ModelInfo,
    Principal,
    build_request_meta,
    render_chat,
    validate_body,
)
from shared.domain import SLO, Request

MODELS = {"m": ModelInfo("m", 1000)}
SLO_ = SLO(1.0, None, None, "x")


def meta(body: dict[str, Any], prompt_tokens: int, chat: bool = False, **kw: Any) -> Request:
    full = {"model": "m", **body}
    if chat:
        full.setdefault("messages", [{"role": "user", "content": "hi"}])
        req: CompletionRequest | ChatCompletionRequest = validate_body(full, ChatCompletionRequest)
    else:
        full.setdefault("prompt", "hi")
        req = validate_body(full, CompletionRequest)
    return build_request_meta(
        request_id="id-7",
        body=req,
        principal=Principal("t1", None),
        slo=SLO_,
        prompt_tokens=prompt_tokens,
        models=MODELS,
        arrival_s=3.5,
        **kw,
    )


@pytest.mark.parametrize(
    ("body", "prompt_tokens", "chat", "config", "expected"),
    [
        ({}, 10, False, None, 256),  # default
        ({}, 900, False, None, 100),  # default capped by remaining context
        ({}, 999, True, None, 1),  # one token left
        ({}, 10, False, AdmissionConfig(default_max_tokens=32), 32),
        ({"max_tokens": 990}, 10, False, None, 990),  # exactly fills the context
        ({"max_completion_tokens": 7}, 10, True, None, 7),
        ({"max_tokens": 7, "max_completion_tokens": 7}, 10, True, None, 7),
    ],
)
def test_ingress_max_tokens_resolution(
    body: dict[str, Any],
    prompt_tokens: int,
    chat: bool,
    config: AdmissionConfig | None,
    expected: int,
) -> None:
    req = meta(body, prompt_tokens, chat, config=config)
    assert req.max_tokens == expected
    assert req.input_tokens == prompt_tokens


@pytest.mark.parametrize(
    ("body", "prompt_tokens", "chat", "status", "param", "code", "fragment"),
    [
        ({"model": "nope"}, 10, False, 404, "model", "model_not_found", "served models: m"),
        ({"max_tokens": 1001}, 10, False, 400, "max_tokens", None, "<= 1000"),
        ({"max_completion_tokens": 5000}, 10, True, 400, "max_completion_tokens", None, "<= 1000"),
        (
            {"max_tokens": 991},
            10,
            False,
            400,
            "prompt",
            "context_length_exceeded",
            "you requested 1001 tokens (10 in the prompt, 991 in the completion)",
        ),
        (
            {"max_tokens": 50},
            980,
            True,
            400,
            "messages",
            "context_length_exceeded",
            "(980 in the messages, 50 in the completion)",
        ),
        ({}, 1000, True, 400, "messages", "context_length_exceeded", "resulted in 1000 tokens"),
        ({}, 0, False, 400, "prompt", None, "at least one token"),
        ({"priority": 1001}, 10, False, 400, "priority", None, "got 1001"),
        ({"priority": -1001}, 10, True, 400, "priority", None, "between -1000 and 1000"),
    ],
)
def test_ingress_admission_rejects(
    body: dict[str, Any],
    prompt_tokens: int,
    chat: bool,
    status: int,
    param: str,
    code: str | None,
    fragment: str,
) -> None:
    with pytest.raises(APIError) as info:
        meta(body, prompt_tokens, chat)
    err = info.value
    assert (err.status, err.param, err.code) == (status, param, code)
    assert fragment in err.message


def test_ingress_admission_fills_request() -> None:
    req = meta({"priority": 1000, "max_tokens": 5}, 12)
    assert req == Request(
        request_id="id-7",
        model="m",
        input_tokens=12,
        max_tokens=5,
        arrival_s=3.5,
        slo=SLO_,
        tenant="t1",
        priority=1000,
    )


def test_ingress_admission_priority_bounds_configurable() -> None:
    with pytest.raises(APIError, match="between -5 and 5"):
        meta({"priority": 6}, 10, config=AdmissionConfig(min_priority=-5, max_priority=5))
    with pytest.raises(ValueError, match="min_priority"):
        AdmissionConfig(min_priority=1, max_priority=0)


def test_ingress_render_chat_fallback() -> None:
    body = validate_body(
        {
            "model": "m",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                },
                {"role": "assistant", "content": None},
            ],
        },
        ChatCompletionRequest,
    )
    assert render_chat(body.messages) == "system: Be brief.\nuser: a\nb\nassistant: \nassistant:"
