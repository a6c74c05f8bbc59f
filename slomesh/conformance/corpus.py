"""The conformance corpus: OpenAI requests covering every generative endpoint and parameter
vLLM serves, streaming and not, valid and invalid. Each case is a route and a body (a dict, or
raw text for bodies that are not JSON); sampling cases carry a seed or run greedy, so a
conforming server answers them token for token as the reference does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Case:
    """One request of the corpus."""

    name: str
    path: str
    body: dict[str, Any] | str | None
    """The JSON body (None: a GET; a string: sent as it is)."""

    @property
    def stream(self) -> bool:
        return isinstance(self.body, dict) and self.body.get("stream") is True


_WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
            "required": ["city"],
        },
    },
}
_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
_HELLO = [{"role": "user", "content": "Hello, who are you?"}]
_TURNS = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Name a colour."},
    {"role": "assistant", "content": "Blue."},
    {"role": "user", "content": "Another one?"},
]


def _chat_bodies(model: str) -> list[tuple[str, dict[str, Any]]]:
    base = {"model": model, "messages": _HELLO, "max_tokens": 12, "temperature": 0}
    seeded = {**base, "temperature": 1.0, "seed": 7}
    return [
        ("greedy", base),
        ("one-token", {**base, "max_tokens": 1}),
        ("max-completion-tokens", {**base, "max_tokens": None, "max_completion_tokens": 9}),
        ("multi-turn-system", {**base, "messages": _TURNS}),
        (
            "content-parts",
            {
                **base,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "Hi"},
                            {"type": "text", "text": "there"},
                        ],
                    }
                ],
            },
        ),
        ("seeded-sampling", seeded),
        ("seeded-top-p", {**seeded, "top_p": 0.8}),
        ("seeded-top-k-min-p", {**seeded, "top_k": 5, "min_p": 0.05}),
        ("stop-string", {**base, "max_tokens": 30, "stop": ["a", "e"]}),
        (
            "stop-include",
            {**base, "max_tokens": 30, "stop": ["e"], "include_stop_str_in_output": True},
        ),
        ("stop-token-ids", {**base, "max_tokens": 30, "stop_token_ids": [100, 200, 300]}),
        ("logprobs", {**base, "logprobs": True}),
        ("top-logprobs", {**base, "logprobs": True, "top_logprobs": 3}),
        ("n2-seeded", {**seeded, "n": 2}),
        ("n3-greedy", {**base, "n": 3}),
        ("presence-frequency", {**base, "presence_penalty": 1.5, "frequency_penalty": 0.5}),
        ("repetition-penalty", {**base, "repetition_penalty": 1.3}),
        ("logit-bias", {**base, "logit_bias": {"100": 100}}),
        ("min-tokens", {**base, "min_tokens": 10, "max_tokens": 12}),
        ("ignore-eos", {**base, "ignore_eos": True, "max_tokens": 20}),
        ("json-object", {**base, "max_tokens": 24, "response_format": {"type": "json_object"}}),
        (
            "json-schema",
            {
                **base,
                "max_tokens": 40,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "person", "schema": _SCHEMA},
                },
            },
        ),
        (
            "tool-named",
            {
                **base,
                "max_tokens": 40,
                "tools": [_WEATHER],
                "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            },
        ),
        (
            "tool-required",
            {**base, "max_tokens": 40, "tools": [_WEATHER], "tool_choice": "required"},
        ),
        ("tool-none", {**base, "tools": [_WEATHER], "tool_choice": "none"}),
        ("tool-auto-without-parser", {**base, "tools": [_WEATHER], "tool_choice": "auto"}),
        ("chat-template-kwargs", {**base, "chat_template_kwargs": {"enable_thinking": False}}),
        ("no-generation-prompt", {**base, "add_generation_prompt": False}),
        (
            "continue-final",
            {
                **base,
                "add_generation_prompt": False,
                "continue_final_message": True,
                "messages": [*_HELLO, {"role": "assistant", "content": "I am"}],
            },
        ),
        (
            "echo",
            {
                **base,
                "echo": True,
                "add_generation_prompt": False,
                "continue_final_message": True,
                "messages": [*_HELLO, {"role": "assistant", "content": "Well"}],
            },
        ),
        ("priority-body", {**base, "priority": 5}),
        ("prompt-logprobs", {**base, "prompt_logprobs": 1}),
        ("skip-special-false", {**base, "skip_special_tokens": False}),
        ("user-field", {**base, "user": "someone"}),
        ("return-token-ids", {**base, "return_token_ids": True}),
        ("default-max-tokens", {k: v for k, v in base.items() if k != "max_tokens"}),
    ]


def _completion_bodies(model: str) -> list[tuple[str, dict[str, Any]]]:
    base = {"model": model, "prompt": "The quick brown fox", "max_tokens": 10, "temperature": 0}
    seeded = {**base, "temperature": 0.9, "seed": 11}
    return [
        ("greedy", base),
        ("echo", {**base, "echo": True}),
        ("logprobs", {**base, "logprobs": 2}),
        ("echo-logprobs", {**base, "echo": True, "logprobs": 1, "max_tokens": 4}),
        ("n2-seeded", {**seeded, "n": 2}),
        ("seeded-sampling", seeded),
        ("stop", {**base, "max_tokens": 30, "stop": ["o"]}),
        ("prompt-list", {**base, "prompt": ["First prompt", "Second prompt"]}),
        ("prompt-token-ids", {**base, "prompt": [1, 450, 4996, 17354]}),
        ("penalties", {**base, "presence_penalty": 1.0, "frequency_penalty": 1.0}),
        ("logit-bias", {**base, "logit_bias": {"200": 50}}),
        ("min-tokens", {**base, "min_tokens": 8}),
        (
            "json-schema",
            {
                **base,
                "max_tokens": 40,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "person", "schema": _SCHEMA},
                },
            },
        ),
        ("structured-regex", {**base, "structured_outputs": {"regex": "[0-9]{3}-[a-z]{2}"}}),
        ("suffix", {**base, "suffix": "end"}),
        ("ignore-eos", {**base, "ignore_eos": True, "max_tokens": 16}),
    ]


def corpus(model: str) -> list[Case]:
    """Every case, for `model` (the served model name on both servers)."""
    cases: list[Case] = []
    chat = _chat_bodies(model)
    for name, body in chat:
        cases.append(Case(f"chat/{name}", "/v1/chat/completions", _clean(body)))
    streamed = {
        "greedy",
        "seeded-sampling",
        "stop-string",
        "top-logprobs",
        "n2-seeded",
        "json-schema",
        "tool-named",
        "tool-required",
        "min-tokens",
        "echo",
        "presence-frequency",
        "logit-bias",
    }
    for name, body in chat:
        if name in streamed:
            cases.append(
                Case(
                    f"chat/{name}/stream", "/v1/chat/completions", _clean({**body, "stream": True})
                )
            )
    cases.append(
        Case(
            "chat/usage/stream",
            "/v1/chat/completions",
            {
                "model": model,
                "messages": _HELLO,
                "max_tokens": 8,
                "temperature": 0,
                "stream": True,
                "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            },
        )
    )
    comp = _completion_bodies(model)
    for name, body in comp:
        cases.append(Case(f"completions/{name}", "/v1/completions", _clean(body)))
    for name, body in comp:
        if name in {"greedy", "echo", "logprobs", "n2-seeded", "stop", "prompt-list"}:
            cases.append(
                Case(f"completions/{name}/stream", "/v1/completions", {**body, "stream": True})
            )
    cases.append(
        Case(
            "completions/usage/stream",
            "/v1/completions",
            {
                "model": model,
                "prompt": "Count: one, two",
                "max_tokens": 6,
                "temperature": 0,
                "stream": True,
                "stream_options": {"include_usage": True},
            },
        )
    )
    cases += _errors(model)
    cases += [
        Case(
            "responses/basic",
            "/v1/responses",
            {"model": model, "input": "Say hi", "max_output_tokens": 12, "temperature": 0},
        ),
        Case(
            "responses/instructions",
            "/v1/responses",
            {
                "model": model,
                "input": "Say hi",
                "instructions": "Be brief.",
                "max_output_tokens": 8,
                "temperature": 0,
            },
        ),
        Case("tokenize/prompt", "/tokenize", {"model": model, "prompt": "Hello world"}),
        Case("tokenize/messages", "/tokenize", {"model": model, "messages": _HELLO}),
        Case(
            "tokenize/no-special",
            "/tokenize",
            {"model": model, "prompt": "Hello", "add_special_tokens": False},
        ),
        Case("detokenize", "/detokenize", {"model": model, "tokens": [1, 450, 4996, 17354]}),
        Case("models", "/v1/models", None),
    ]
    return cases


def _errors(model: str) -> list[Case]:
    chat = "/v1/chat/completions"
    ok = {"model": model, "messages": _HELLO, "max_tokens": 4, "temperature": 0}
    bad: list[tuple[str, dict[str, Any] | str]] = [
        ("missing-messages", {"model": model, "max_tokens": 4}),
        ("max-tokens-string", {**ok, "max_tokens": "x"}),
        ("max-tokens-negative", {**ok, "max_tokens": -1}),
        ("max-tokens-over-context", {**ok, "max_tokens": 5000}),
        ("temperature-negative", {**ok, "temperature": -1}),
        ("n-zero", {**ok, "n": 0}),
        ("unknown-model", {**ok, "model": "no-such-model"}),
        ("not-json", "this is not json"),
        ("json-array", "[1, 2, 3]"),
        ("empty-messages", {**ok, "messages": []}),
        ("bad-role", {**ok, "messages": [{"role": "wizard", "content": "hi"}]}),
        ("top-logprobs-over-limit", {**ok, "logprobs": True, "top_logprobs": 50}),
        ("stream-options-without-stream", {**ok, "stream_options": {"include_usage": True}}),
        ("bad-response-format", {**ok, "response_format": {"type": "yaml"}}),
        (
            "tool-choice-unknown-tool",
            {
                **ok,
                "tools": [_WEATHER],
                "tool_choice": {"type": "function", "function": {"name": "nope"}},
            },
        ),
        ("prompt-too-long", {**ok, "messages": [{"role": "user", "content": "word " * 3000}]}),
        ("top-p-over-one", {**ok, "top_p": 2}),
        ("logit-bias-bad-token", {**ok, "logit_bias": {"abc": 1}}),
    ]
    cases = [Case(f"error/chat/{name}", chat, body) for name, body in bad]
    cases += [
        Case(
            "error/completions/missing-prompt",
            "/v1/completions",
            {"model": model, "temperature": 0},
        ),
        Case(
            "error/completions/echo-stream-logprobs-too-many",
            "/v1/completions",
            {"model": model, "prompt": "hi", "logprobs": 50},
        ),
        Case(
            "error/completions/prompt-too-long",
            "/v1/completions",
            {"model": model, "prompt": "word " * 3000, "max_tokens": 4},
        ),
    ]
    return cases


def _clean(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if v is not None}
