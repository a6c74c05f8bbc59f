"""The conformance suite's comparison: what is removed, how streams are reassembled, what
counts as a difference."""

from __future__ import annotations

import json

import pytest

from slomesh.conformance.compare import answer, differences, events, normalise, reassemble
from slomesh.conformance.corpus import corpus


def _sse(*chunks: object) -> bytes:
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode() + b"data: [DONE]\n\n"


def _chunk(index: int, content: str, finish: str | None = None) -> dict[str, object]:
    return {
        "id": "chatcmpl-abc123",
        "created": 1,
        "choices": [{"index": index, "delta": {"content": content}, "finish_reason": finish}],
    }


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"id": "x", "created": 5, "a": 1}, {"a": 1}),
        (
            {"system_fingerprint": "vllm-1", "choices": [{"id": "y", "t": "z"}]},
            {"choices": [{"t": "z"}]},
        ),
        ("Request chatcmpl-8f3a2b failed", "Request chatcmpl-<id> failed"),
        ([{"created_at": 3, "k": "v"}], [{"k": "v"}]),
    ],
)
def test_normalise_removes_only_volatile_parts(value: object, expected: object) -> None:
    assert normalise(value) == expected


def test_streams_chunked_differently_reassemble_the_same() -> None:
    one = _sse(_chunk(0, "Hel"), _chunk(1, "A"), _chunk(0, "lo", "length"), _chunk(1, "B", "stop"))
    two = _sse(_chunk(1, "AB", "stop"), _chunk(0, "Hello", "length"))
    a, b = answer(200, one, stream=True), answer(200, two, stream=True)
    assert differences(a, b) == []
    texts = [c["text"] for c in a.content["choices"]]
    assert texts == ["Hello", "AB"]


@pytest.mark.parametrize(
    ("ref", "got", "expected"),
    [
        (
            (200, {"choices": [{"text": "a"}]}),
            (200, {"choices": [{"text": "b"}]}),
            ".choices[0].text",
        ),
        ((400, {"error": {}}), (200, {}), "status 400 != 200"),
        ((200, {"choices": [1, 2]}), (200, {"choices": [1]}), ".choices: 2 items != 1"),
        (
            (200, {"usage": {"prompt_tokens": 48}}),
            (200, {"usage": {"prompt_tokens": 49}}),
            ".usage.prompt_tokens",
        ),
    ],
)
def test_differences_name_where(
    ref: tuple[int, object], got: tuple[int, object], expected: str
) -> None:
    a = answer(ref[0], json.dumps(ref[1]).encode(), stream=False)
    b = answer(got[0], json.dumps(got[1]).encode(), stream=False)
    found = differences(a, b)
    assert found and found[0].startswith(expected)


def test_tool_call_deltas_and_usage_are_folded() -> None:
    calls = [
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call-1",
                                "function": {"name": "get_weather", "arguments": '{"ci'},
                            }
                        ]
                    },
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [{"index": 0, "function": {"arguments": 'ty": "Oslo"}'}}]
                    },
                    "finish_reason": "tool_calls",
                }
            ]
        },
        {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 5}},
    ]
    out = reassemble(events(_sse(*calls).decode()))
    assert out["choices"][0]["tool_calls"] == {
        0: {"name": "get_weather", "args": '{"city": "Oslo"}'}
    }
    assert out["usage"] == {"prompt_tokens": 3, "completion_tokens": 5}
    assert out["done"] is True


def test_corpus_covers_every_route_both_ways_and_errors() -> None:
    cases = corpus("m")
    assert len(cases) >= 80
    assert len({c.name for c in cases}) == len(cases)
    routes = {c.path for c in cases}
    assert routes >= {
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/responses",
        "/tokenize",
        "/detokenize",
        "/v1/models",
    }
    assert sum(c.stream for c in cases) >= 15
    assert sum(c.name.startswith("error/") for c in cases) >= 15
