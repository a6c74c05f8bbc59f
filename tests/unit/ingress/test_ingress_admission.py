"""What admission reads of an OpenAI body (request_view.read_view), the body vLLM gets
(forward_body), the prompt admission counts (prompt_text) and the control plane's request
(request_meta.admission_request): vLLM validates the request itself, so admission reads leniently
and only bounds what it plans on."""

from __future__ import annotations

import json
from typing import Any

import pytest

from services.ingress.core import AdmissionConfig, APIError, ModelInfo, Principal
from services.ingress.core.request_meta import admission_request
from services.ingress.core.request_view import (
    RequestView,
    forward_body,
    prompt_text,
    read_view,
)
from shared.domain import SLO, Request

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
RESPONSES = "/v1/responses"
MODELS = {
    "m": ModelInfo("m", 1000),
    "other": ModelInfo("other", 64),
    "m-sql": ModelInfo("m-sql", 1000, "m"),  # a LoRA adapter of m
}
SLO_ = SLO(1.0, None, None, "x")


@pytest.mark.parametrize(
    ("route", "data", "expected"),
    [
        (CHAT, {"model": "m"}, {"model": "m", "max_tokens": None, "n": 1, "stream": False}),
        (CHAT, {}, {"model": "first"}),  # no model: the mesh's first, as vLLM serves its first
        (CHAT, [1, 2], {"model": "first", "body": {}}),  # not an object: vLLM answers it
        (CHAT, {"model": 7}, {"model": "first"}),  # wrong type reads as absent
        # chat: max_completion_tokens preferred over the deprecated max_tokens
        (CHAT, {"max_tokens": 9, "max_completion_tokens": 5}, {"max_tokens": 5}),
        (CHAT, {"max_tokens": 9}, {"max_tokens": 9}),
        (CHAT, {"max_tokens": 9, "max_completion_tokens": "5"}, {"max_tokens": 9}),
        (COMPLETIONS, {"max_tokens": 9, "max_completion_tokens": 5}, {"max_tokens": 9}),
        (RESPONSES, {"max_output_tokens": 11, "max_tokens": 3}, {"max_tokens": 11}),
        (CHAT, {"max_tokens": "5"}, {"max_tokens": None}),
        (CHAT, {"max_tokens": 5.0}, {"max_tokens": None}),
        (CHAT, {"max_tokens": True}, {"max_tokens": None}),  # a bool is not a count
        (CHAT, {"n": 3}, {"n": 3}),
        (CHAT, {"n": 0}, {"n": 1}),
        (CHAT, {"n": "2"}, {"n": 1}),
        (CHAT, {"stream": True}, {"stream": True}),
        (CHAT, {"stream": "yes"}, {"stream": False}),
        (CHAT, {"priority": -7}, {"priority": -7}),
        (CHAT, {"priority": "high"}, {"priority": 0}),
        (CHAT, {"ignore_eos": True}, {"ignore_eos": True}),
        (CHAT, {"ignore_eos": 1}, {"ignore_eos": False}),
        (CHAT, {"slo": "interactive"}, {"slo": "interactive"}),
        (CHAT, {"slo": {"ttft_ms": 5}}, {"slo": {"ttft_ms": 5}}),
    ],
)
def test_read_view_reads_leniently(route: str, data: Any, expected: dict[str, Any]) -> None:
    view = read_view(route, data, "first")
    assert view.route == route
    for name, value in expected.items():
        assert getattr(view, name) == value, name


@pytest.mark.parametrize(
    ("route", "generates"),
    [(CHAT, True), (COMPLETIONS, True), (RESPONSES, True), ("/tokenize", False)],
)
def test_read_view_generating_routes(route: str, generates: bool) -> None:
    assert read_view(route, {}, "m").generates is generates


def _forward(body: dict[str, Any]) -> dict[str, Any]:
    raw = json.dumps(body).encode()
    out: dict[str, Any] = json.loads(forward_body(read_view(CHAT, body, "m"), raw))
    return out


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"model": "m", "slo": "interactive"}, {"model": "m"}),  # slomesh's, not vLLM's
        ({"model": "m", "slo": {"ttft_ms": 100}}, {"model": "m"}),
        # a client's own slomesh metadata is dropped: no spoofed deadline or engine priority
        (
            {"model": "m", "vllm_xargs": {"slomesh": '{"priority": -99}'}},
            {"model": "m", "vllm_xargs": {}},
        ),
        (
            {"model": "m", "vllm_xargs": {"slomesh": {"priority": -99}, "k": 1}, "slo": "x"},
            {"model": "m", "vllm_xargs": {"k": 1}},
        ),
        ({"model": "m", "vllm_xargs": "nope", "slo": "x"}, {"model": "m", "vllm_xargs": "nope"}),
    ],
)
def test_forward_body_strips_slomesh_fields(body: dict[str, Any], expected: dict[str, Any]) -> None:
    assert _forward(body) == expected


@pytest.mark.parametrize(
    "raw",
    [
        # every vLLM field as sent, byte for byte (spacing and key order included)
        rb'{"model":"m", "messages":[{"role":"user","content":"h\u00e9llo"}], "n":2,'
        b' "temperature":7, "priority":-5, "stop":["a","b","c","d","e"],'
        b' "vllm_xargs":{"k":2.5}, "response_format":{"type":"json_object"}}',
        b"[1, 2]",
        b"not json",
        b"",
        b'{"model": "m",',  # does not parse: vLLM answers its own 400 for it
    ],
)
def test_forward_body_sends_everything_else_byte_for_byte(raw: bytes) -> None:
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    assert forward_body(read_view(CHAT, data, "m"), raw) == raw


class _Tokenizer:
    """A tokenizer double: one id per character, BOS (id 1) first unless add_special_tokens is
    False; its chat template writes the BOS as text, as Llama's `{{ bos_token }}` does."""

    chat_template = "{{ bos_token }}..."

    def __init__(self) -> None:
        self.rendered: list[dict[str, Any]] = []

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        ids = [1] if add_special_tokens else []
        if text.startswith("<s>"):
            ids.append(1)
            text = text[3:]
        return {"input_ids": ids + [ord(c) for c in text]}

    def apply_chat_template(self, messages: list[Any], **kwargs: Any) -> str:
        self.rendered.append(kwargs)
        turns = "".join(f"{m['role']}: {m['content']}\n" for m in messages)
        return "<s>" + turns + ("assistant:" if kwargs["add_generation_prompt"] else "")


def test_chat_prompt_is_counted_without_a_second_bos() -> None:
    tok = _Tokenizer()
    body = {"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"x": 1}}
    text, ids = prompt_text(read_view(CHAT, body, "m"), tok)
    assert text == "<s>user: hi\nassistant:"
    assert ids is not None and ids.count(1) == 1 and ids[0] == 1
    assert len(ids) == 1 + len("user: hi\nassistant:")
    (kwargs,) = tok.rendered
    assert kwargs["tokenize"] is False and kwargs["x"] == 1 and kwargs["tools"] is None


def test_chat_prompt_honours_add_generation_prompt_and_tools() -> None:
    tok = _Tokenizer()
    tools = [{"type": "function", "function": {"name": "f"}}]
    body = {"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": False}
    text, _ = prompt_text(read_view(CHAT, {**body, "tools": tools}, "m"), tok)
    assert text == "<s>user: hi\n"
    assert tok.rendered[0]["tools"] == tools


@pytest.mark.parametrize(
    ("route", "body", "text", "ids"),
    [
        (COMPLETIONS, {"prompt": "abc"}, "abc", [1, 97, 98, 99]),  # vLLM adds BOS here
        (COMPLETIONS, {"prompt": [5, 6, 7]}, "", [5, 6, 7]),  # token ids count as they are
        (COMPLETIONS, {"prompt": ["ab", "cd"]}, "ab\ncd", None),  # several prompts
        (RESPONSES, {"input": "hey"}, "hey", [1, 104, 101, 121]),
        (COMPLETIONS, {"prompt": {"odd": 1}}, '{"odd": 1}', None),  # vLLM answers its 400
    ],
)
def test_prompt_text_of_completions_and_responses(
    route: str, body: dict[str, Any], text: str, ids: list[int] | None
) -> None:
    assert prompt_text(read_view(route, body, "m"), _Tokenizer()) == (text, ids)


def test_prompt_text_without_tokenizer_or_template_counts_the_json_text() -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": "a"}]}]
    view = read_view(CHAT, {"messages": messages}, "m")
    assert prompt_text(view, None) == (json.dumps(messages), None)
    assert prompt_text(read_view(COMPLETIONS, {"prompt": "abc"}, "m"), None) == ("abc", None)


def admit(view: RequestView, prompt_tokens: int, config: AdmissionConfig | None = None) -> Request:
    return admission_request(
        request_id="id-7",
        view=view,
        principal=Principal("t1", None),
        slo=SLO_,
        prompt_tokens=prompt_tokens,
        models=MODELS,
        arrival_s=3.5,
        config=config,
    )


@pytest.mark.parametrize(
    ("body", "prompt_tokens", "input_tokens", "max_tokens"),
    [
        ({}, 10, 10, 990),  # no budget: vLLM's default, the context left
        ({"max_tokens": 5}, 10, 10, 5),
        ({"max_tokens": 990}, 10, 10, 990),  # exactly fills the context
        ({"max_tokens": 5000}, 10, 10, 990),  # vLLM refuses it; admission plans on what fits
        ({"max_tokens": 0}, 10, 10, 990),  # vLLM's 400; read as no budget
        ({}, 5000, 999, 1),  # a prompt over the context: vLLM's 400, one token planned
        ({}, 0, 1, 999),
        ({"max_completion_tokens": 7, "max_tokens": 300}, 10, 10, 7),
        ({"n": 4, "max_tokens": 8}, 10, 10, 8),  # per choice: the predictor's estimate is too
    ],
)
def test_admission_bounds_what_it_plans_on(
    body: dict[str, Any], prompt_tokens: int, input_tokens: int, max_tokens: int
) -> None:
    req = admit(read_view(CHAT, {"model": "m", **body}, "m"), prompt_tokens)
    assert (req.input_tokens, req.max_tokens) == (input_tokens, max_tokens)


def test_admission_fills_the_request() -> None:
    view = read_view(COMPLETIONS, {"model": "m", "priority": -20, "max_tokens": 5}, "m")
    assert admit(view, 12) == Request(
        request_id="id-7",
        model="m",
        input_tokens=12,
        max_tokens=5,
        arrival_s=3.5,
        slo=SLO_,
        tenant="t1",
        priority=-20,
    )


@pytest.mark.parametrize(("priority", "kept"), [(6, 5), (-6, -5), (3, 3), (0, 0)])
def test_admission_clamps_the_body_priority_to_the_configured_range(
    priority: int, kept: int
) -> None:
    config = AdmissionConfig(min_priority=-5, max_priority=5)
    view = read_view(CHAT, {"model": "m", "priority": priority}, "m")
    assert admit(view, 10, config).priority == kept  # vLLM accepts any integer: no 400
    with pytest.raises(ValueError, match="min_priority"):
        AdmissionConfig(min_priority=1, max_priority=0)


def test_unknown_model_is_vllms_404() -> None:  # its valid aliases: base models, no adapter
    with pytest.raises(APIError) as info:
        admit(read_view(CHAT, {"model": "gpt-9"}, "m"), 10)
    assert info.value.status == 404
    assert info.value.body() == {
        "error": {
            "message": "The model `gpt-9` does not exist. Valid aliases: m, other.",
            "type": "NotFoundError",
            "param": "model",
            "code": 404,
        }
    }
