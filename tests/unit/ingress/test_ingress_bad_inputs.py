"""Every bad-input class runs through the whole ingress core (parse -> authenticate -> resolve SLO
-> admit) and comes out as the right status, OpenAI's error shape and a param/message naming the
field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from services.ingress.core import (
    APIError,
    APIKeyConfig,
    ChatCompletionRequest,
    CompletionRequest,
    ModelInfo,
    SLOPolicy,
    authenticate,
    build_request_meta,
    parse_body,
    resolve_slo,
)
from shared.domain import Request

MODELS = {"llama": ModelInfo("llama", 4096), "qwen": ModelInfo("qwen", 2048)}
KEYS = APIKeyConfig.model_validate(
    {"keys": {"sk-good": {"tenant": "acme", "default_class": "batch-1"}}, "required": True}
)
GOOD_AUTH = "Bearer sk-good"


def admit(
    raw: bytes | str,
    *,
    chat: bool = True,
    headers: dict[str, str] | None = None,
    authorization: str | None = GOOD_AUTH,
    keys: APIKeyConfig = KEYS,
    prompt_tokens: int = 100,
) -> Request:
    """The ingress core end to end, as the shell drives it."""
    principal = authenticate(authorization, keys)
    body = parse_body(raw, ChatCompletionRequest if chat else CompletionRequest)
    slo = resolve_slo(body.slo, headers or {}, principal.default_class, SLOPolicy())
    return build_request_meta(
        request_id="r1",
        body=body,
        principal=principal,
        slo=slo,
        prompt_tokens=prompt_tokens,
        models=MODELS,
        arrival_s=10.0,
    )


def chat(**fields: Any) -> str:
    body: dict[str, Any] = {"model": "llama", "messages": [{"role": "user", "content": "hi"}]}
    body.update(fields)
    return json.dumps(body)


def assert_openai_error(err: APIError, status: int, param: str | None, fragment: str) -> None:
    body = err.body()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert err.status == status
    assert body["error"]["param"] == param
    assert fragment in body["error"]["message"]
    assert isinstance(body["error"]["type"], str) and body["error"]["type"]


CASES = [
    # (name, raw body, kwargs, status, param, message fragment, code)
    ("malformed-json", '{"model": "llama",', {}, 400, None, "not valid JSON", None),
    ("not-utf8", b'{"model": "\xff"}', {}, 400, "model", "must be valid Unicode",
     "invalid_unicode"),
    ("json-array", "[1, 2]", {}, 400, None, "must be a JSON object", None),
    ("missing-model", json.dumps({"messages": []}), {}, 400, "model", "Field required", None),
    ("model-wrong-type", chat(model=7), {}, 400, "model", "valid string", None),
    ("max-tokens-string", chat(max_tokens="5"), {}, 400, "max_tokens", "valid integer", None),
    ("max-tokens-float", chat(max_tokens=5.5), {}, 400, "max_tokens", "valid integer", None),
    ("max-tokens-negative", chat(max_tokens=-3), {}, 400, "max_tokens", "greater than 0", None),
    ("max-tokens-zero", chat(max_tokens=0), {}, 400, "max_tokens", "greater than 0", None),
    ("max-tokens-absurd", chat(max_tokens=10**9), {}, 400, "max_tokens", "<= 4096", None),
    (
        "max-completion-tokens-absurd",
        chat(max_completion_tokens=10**9),
        {},
        400,
        "max_completion_tokens",
        "<= 4096",
        None,
    ),
    ("stream-wrong-type", chat(stream="yes"), {}, 400, "stream", "valid boolean", None),
    ("ignore-eos-wrong-type", chat(ignore_eos="yes"), {}, 400, "ignore_eos", "valid boolean",
     None),
    ("ignore-eos-number-completion",
     json.dumps({"model": "llama", "prompt": "x", "ignore_eos": 1}), {"chat": False}, 400,
     "ignore_eos", "valid boolean", None),
    ("temperature-range", chat(temperature=7), {}, 400, "temperature", "less than or equal", None),
    ("top-p-zero", chat(top_p=0), {}, 400, "top_p", "greater than 0", None),
    ("bad-role", chat(messages=[{"role": "bot", "content": "x"}]), {}, 400,
     "messages[0].role", "'system'", None),
    ("no-messages", chat(messages=[]), {}, 400, "messages", "at least 1", None),
    ("image-part", chat(messages=[{"role": "user", "content": [{"type": "image_url"}]}]), {},
     400, "messages[0].content", "only type 'text'", None),
    ("priority-wrong-type", chat(priority="high"), {}, 400, "priority", "valid integer", None),
    ("priority-absurd", chat(priority=5000), {}, 400, "priority", "between -1000 and 1000", None),
    ("slo-negative-ttft", chat(slo={"ttft_ms": -5}), {}, 400, "slo.ttft_ms", "greater than 0",
     None),
    ("slo-zero-tpot", chat(slo={"tpot_ms": 0}), {}, 400, "slo.tpot_ms", "greater than 0", None),
    ("slo-absurd-ttft", chat(slo={"ttft_ms": 1e12}), {}, 400, "slo.ttft_ms", "<= 86400000",
     None),
    ("slo-absurd-deadline", chat(slo={"ttft_ms": 100, "deadline_ms": 1e15}), {}, 400,
     "slo.deadline_ms", "<=", None),
    ("slo-string-number", chat(slo={"ttft_ms": "fast"}), {}, 400, "slo.ttft_ms", "valid number",
     None),
    ("slo-typo-field", chat(slo={"ttft": 100}), {}, 400, "slo.ttft", "Extra inputs", None),
    ("slo-unknown-class", chat(slo="platinum"), {}, 400, "slo", "valid: batch-1, batch-2", None),
    ("slo-wrong-type", chat(slo=12), {}, 400, "slo", "class name or an object", None),
    ("header-non-numeric", chat(), {"headers": {"X-SLO-TTFT-MS": "soon"}}, 400,
     "x-slo-ttft-ms", "positive number", None),
    ("header-negative", chat(), {"headers": {"x-slo-tpot-ms": "-1"}}, 400, "x-slo-tpot-ms",
     "positive number", None),
    ("header-absurd", chat(), {"headers": {"x-slo-ttft-ms": "1e11"}}, 400, "x-slo-ttft-ms",
     "<=", None),
    ("unknown-model", chat(model="gpt-9"), {}, 404, "model", "served models: llama, qwen",
     "model_not_found"),
    ("oversized-prompt", chat(max_tokens=100), {"prompt_tokens": 4000}, 400, "messages",
     "maximum context length is 4096", "context_length_exceeded"),
    ("prompt-fills-context", chat(), {"prompt_tokens": 4096}, 400, "messages",
     "resulted in 4096 tokens", "context_length_exceeded"),
    ("oversized-completion-prompt", json.dumps({"model": "qwen", "prompt": "x", "max_tokens": 50}),
     {"prompt_tokens": 2000, "chat": False}, 400, "prompt", "2050 tokens",
     "context_length_exceeded"),
    ("n-prompts", json.dumps({"model": "llama", "prompt": ["a", "b"]}), {"chat": False}, 400,
     "prompt", "n>1 prompts not supported", None),
    ("missing-key", chat(), {"authorization": None}, 401, None, "missing API key",
     "invalid_api_key"),
    ("wrong-key", chat(), {"authorization": "Bearer sk-bad"}, 401, None, "invalid API key",
     "invalid_api_key"),
    ("malformed-auth", chat(), {"authorization": "Token sk-good"}, 401, None, "malformed",
     "invalid_api_key"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "kwargs", "status", "param", "fragment", "code"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_ingress_bad_input_is_openai_error(
    raw: str | bytes,
    kwargs: dict[str, Any],
    status: int,
    param: str | None,
    fragment: str,
    code: str | None,
) -> None:
    with pytest.raises(APIError) as info:
        admit(raw, **kwargs)
    assert_openai_error(info.value, status, param, fragment)
    assert info.value.code == code
    if param is not None:
        assert info.value.message.startswith(param) or code is not None


def test_ingress_good_request_passes_every_stage() -> None:
    req = admit(chat(max_tokens=64, priority=-5), headers={"X-Slo-Ttft-Ms": "750"})
    assert (req.request_id, req.model, req.input_tokens, req.max_tokens) == ("r1", "llama", 100, 64)
    assert (req.tenant, req.priority, req.arrival_s) == ("acme", -5, 10.0)
    assert req.slo.ttft_deadline_s == pytest.approx(0.75)
    assert req.slo.class_name == "custom"


def test_ingress_key_default_class_applies_without_slo() -> None:
    req = admit(chat())
    assert req.slo.class_name == "batch-1"
    assert req.slo.ttft_deadline_s == pytest.approx(60.0)
