"""Response bodies, usage totals, chunk sequences and SSE framing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from services.ingress.core.openai_schema import (
    SSE_DONE,
    ChunkStream,
    chat_chunk,
    chat_completion_response,
    completion_chunk,
    completion_response,
    sse,
    usage,
)

IDS = {"request_id": "r9", "model": "m", "created_s": 1700000000.9}


@pytest.mark.parametrize(("p", "c", "total"), [(0, 0, 0), (12, 30, 42), (1, 0, 1)])
def test_ingress_usage_totals(p: int, c: int, total: int) -> None:
    assert usage(p, c) == {"prompt_tokens": p, "completion_tokens": c, "total_tokens": total}


def test_ingress_usage_rejects_negative() -> None:
    with pytest.raises(ValueError):
        usage(-1, 3)


def test_ingress_completion_response_shape() -> None:
    body = completion_response(
        **IDS, text="out", finish_reason="length", prompt_tokens=5, completion_tokens=7
    )
    assert body == {
        "id": "cmpl-r9",
        "object": "text_completion",
        "created": 1700000000,
        "model": "m",
        "choices": [{"index": 0, "text": "out", "logprobs": None, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
    }


def test_ingress_chat_response_shape() -> None:
    body = chat_completion_response(
        **IDS, text="hi", finish_reason="stop", prompt_tokens=3, completion_tokens=2
    )
    assert (body["id"], body["object"], body["created"]) == (
        "chatcmpl-r9",
        "chat.completion",
        1700000000,
    )
    assert body["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "hi"},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ]
    assert body["usage"]["total_tokens"] == 5


def test_ingress_single_chunk_builders() -> None:
    c = completion_chunk(**IDS, text="x")
    assert (c["id"], c["object"], c["choices"][0]["text"]) == ("cmpl-r9", "text_completion", "x")
    assert "usage" not in c
    assert completion_chunk(**IDS, text="", include_usage=True)["usage"] is None
    first = chat_chunk(**IDS, role="assistant", content="")
    assert first["object"] == "chat.completion.chunk"
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    last = chat_chunk(**IDS, finish_reason="stop")
    assert last["choices"][0]["delta"] == {}
    assert last["choices"][0]["finish_reason"] == "stop"


def deltas(chunks: list[dict[str, Any]]) -> list[Any]:
    return [c["choices"][0]["delta"] if c["choices"] else "usage" for c in chunks]


@pytest.mark.parametrize("include_usage", [False, True])
def test_ingress_chat_chunk_sequence(include_usage: bool) -> None:
    s = ChunkStream("chat", **IDS, include_usage=include_usage)
    chunks = s.delta("Hel") + s.delta("") + s.delta("lo")
    chunks += s.finish("length", prompt_tokens=4, completion_tokens=2, text="!")
    expected: list[Any] = [
        {"role": "assistant", "content": ""},
        {"content": "Hel"},
        {"content": "lo"},
        {"content": "!"},
        {},
    ]
    if include_usage:
        expected.append("usage")
    assert deltas(chunks) == expected
    with_choices = [c for c in chunks if c["choices"]]
    assert [c["choices"][0]["finish_reason"] for c in with_choices] == [None] * 4 + ["length"]
    assert {c["id"] for c in chunks} == {"chatcmpl-r9"}
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert all(("usage" in c) == include_usage for c in chunks)
    if include_usage:
        assert chunks[-1]["choices"] == []
        assert chunks[-1]["usage"] == {
            "prompt_tokens": 4,
            "completion_tokens": 2,
            "total_tokens": 6,
        }
    assert s.finished
    with pytest.raises(RuntimeError):
        s.delta("more")


def test_ingress_chat_stream_without_text_still_sends_role_first() -> None:
    chunks = ChunkStream("chat", **IDS).finish("stop", prompt_tokens=1, completion_tokens=0)
    assert deltas(chunks) == [{"role": "assistant", "content": ""}, {}]


def test_ingress_completion_chunk_sequence() -> None:
    s = ChunkStream("completion", **IDS, include_usage=True)
    chunks = s.delta("a") + s.finish("stop", prompt_tokens=3, completion_tokens=1)
    assert [c["choices"][0]["text"] if c["choices"] else None for c in chunks] == ["a", "", None]
    assert [c["choices"][0]["finish_reason"] for c in chunks[:2]] == [None, "stop"]
    assert chunks[-1]["usage"]["total_tokens"] == 4
    assert {c["object"] for c in chunks} == {"text_completion"}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"a": 1, "b": "é"}, 'data: {"a":1,"b":"é"}\n\n'.encode()),
        ("[DONE]", b"data: [DONE]\n\n"),
        ("line1\nline2", b"data: line1\ndata: line2\n\n"),
        ("a\r\nb", b"data: a\ndata: b\n\n"),
        ("", b"data: \n\n"),
        ({"t": "x\u2028y\nz"}, 'data: {"t":"x\u2028y\\nz"}\n\n'.encode()),
    ],
)
def test_ingress_sse_framing(data: dict[str, Any] | str, expected: bytes) -> None:
    assert sse(data) == expected


def test_ingress_sse_done_and_roundtrip() -> None:
    assert sse("[DONE]") == SSE_DONE == b"data: [DONE]\n\n"
    chunk = chat_chunk(**IDS, content="multi\nline")
    frame = sse(chunk)
    assert frame.startswith(b"data: ") and frame.endswith(b"\n\n")
    assert frame.count(b"\n") == 2  # JSON escapes newlines: one event, one line
    assert json.loads(frame[len(b"data: ") : -2]) == chunk
