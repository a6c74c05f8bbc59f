"""OpenAI-compatible response bodies, streaming chunks and server-sent-event framing.

Non-streaming: `completion_response` / `chat_completion_response` (one choice, with `usage`).
Streaming: `completion_chunk` / `chat_chunk` build single chunks; `ChunkStream` sequences them the
way OpenAI does (chat: a first chunk carrying the role, content chunks, a last chunk carrying
finish_reason, then, with include_usage, a chunk with empty choices and the usage). `sse` frames a
chunk as `data: ...\\n\\n`; `SSE_DONE` is the terminating `data: [DONE]\\n\\n`.
`created` is always the Unix time the caller passes in (no wall clock here).
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

FinishReason = Literal["stop", "length", "abort"]
StreamKind = Literal["completion", "chat"]

SSE_DONE = b"data: [DONE]\n\n"


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    """OpenAI's usage object: prompt, completion and total tokens."""
    if prompt_tokens < 0 or completion_tokens < 0:
        raise ValueError(f"token counts must be >= 0, got {prompt_tokens}, {completion_tokens}")
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _head(
    kind: StreamKind, request_id: str, model: str, created_s: float, obj: str
) -> dict[str, Any]:
    prefix = "chatcmpl-" if kind == "chat" else "cmpl-"
    return {"id": prefix + request_id, "object": obj, "created": int(created_s), "model": model}


def completion_response(
    *,
    request_id: str,
    model: str,
    created_s: float,
    text: str,
    finish_reason: FinishReason,
    prompt_tokens: int,
    completion_tokens: int,
) -> dict[str, Any]:
    """Body of a non-streaming /v1/completions response."""
    body = _head("completion", request_id, model, created_s, "text_completion")
    body["choices"] = [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}]
    body["usage"] = usage(prompt_tokens, completion_tokens)
    return body


def chat_completion_response(
    *,
    request_id: str,
    model: str,
    created_s: float,
    text: str,
    finish_reason: FinishReason,
    prompt_tokens: int,
    completion_tokens: int,
) -> dict[str, Any]:
    """Body of a non-streaming /v1/chat/completions response."""
    body = _head("chat", request_id, model, created_s, "chat.completion")
    body["choices"] = [
        {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "logprobs": None,
            "finish_reason": finish_reason,
        }
    ]
    body["usage"] = usage(prompt_tokens, completion_tokens)
    return body


def completion_chunk(
    *,
    request_id: str,
    model: str,
    created_s: float,
    text: str,
    finish_reason: FinishReason | None = None,
    include_usage: bool = False,
) -> dict[str, Any]:
    """One streamed /v1/completions chunk. With include_usage it carries "usage": null, as
    OpenAI's chunks do before the final usage chunk."""
    body = _head("completion", request_id, model, created_s, "text_completion")
    body["choices"] = [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}]
    if include_usage:
        body["usage"] = None
    return body


def chat_chunk(
    *,
    request_id: str,
    model: str,
    created_s: float,
    content: str | None = None,
    role: Literal["assistant"] | None = None,
    finish_reason: FinishReason | None = None,
    include_usage: bool = False,
) -> dict[str, Any]:
    """One streamed chat chunk: the delta holds role and/or content when given (empty on the
    finishing chunk)."""
    delta: dict[str, Any] = {}
    if role is not None:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    body = _head("chat", request_id, model, created_s, "chat.completion.chunk")
    body["choices"] = [
        {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
    ]
    if include_usage:
        body["usage"] = None
    return body


def usage_chunk(
    kind: StreamKind,
    *,
    request_id: str,
    model: str,
    created_s: float,
    prompt_tokens: int,
    completion_tokens: int,
) -> dict[str, Any]:
    """The final chunk sent with include_usage: empty choices, the request's usage."""
    obj = "chat.completion.chunk" if kind == "chat" else "text_completion"
    body = _head(kind, request_id, model, created_s, obj)
    body["choices"] = []
    body["usage"] = usage(prompt_tokens, completion_tokens)
    return body


class ChunkStream:
    """Sequences the chunks of one streamed response (pure; the shell frames them with `sse`).

    Chat: the first chunk carries {"role": "assistant", "content": ""}; each `delta` adds a
    content chunk; `finish` adds a chunk with an empty delta and the finish_reason, then (with
    include_usage) the usage chunk. Completions: text chunks, a finishing chunk with the
    finish_reason, then the usage chunk. Empty deltas emit nothing.
    """

    def __init__(
        self,
        kind: StreamKind,
        *,
        request_id: str,
        model: str,
        created_s: float,
        include_usage: bool = False,
    ) -> None:
        self.kind: StreamKind = kind
        self.request_id = request_id
        self.model = model
        self.created_s = created_s
        self.include_usage = include_usage
        self._started = False
        self._finished = False

    @property
    def finished(self) -> bool:
        """Whether `finish` was called."""
        return self._finished

    def _chunk(
        self,
        text: str | None,
        finish_reason: FinishReason | None = None,
        role: Literal["assistant"] | None = None,
    ) -> dict[str, Any]:
        common: dict[str, Any] = {
            "request_id": self.request_id,
            "model": self.model,
            "created_s": self.created_s,
            "finish_reason": finish_reason,
            "include_usage": self.include_usage,
        }
        if self.kind == "chat":
            return chat_chunk(content=text, role=role, **common)
        return completion_chunk(text=text or "", **common)

    def _start(self) -> list[dict[str, Any]]:
        if self._finished:
            raise RuntimeError(f"stream {self.request_id} already finished")
        if self._started:
            return []
        self._started = True
        return [self._chunk("", role="assistant")] if self.kind == "chat" else []

    def delta(self, text: str) -> list[dict[str, Any]]:
        """Chunks for newly generated text (the role chunk first, on a chat stream's first call)."""
        out = self._start()
        if text:
            out.append(self._chunk(text))
        return out

    def finish(
        self,
        finish_reason: FinishReason,
        *,
        prompt_tokens: int,
        completion_tokens: int,
        text: str = "",
    ) -> list[dict[str, Any]]:
        """The closing chunks: any last text, the finish_reason chunk, then the usage chunk."""
        out = self.delta(text)
        if self.kind == "chat":
            out.append(self._chunk(None, finish_reason))
        else:
            out.append(self._chunk("", finish_reason))
        if self.include_usage:
            out.append(
                usage_chunk(
                    self.kind,
                    request_id=self.request_id,
                    model=self.model,
                    created_s=self.created_s,
                    prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens,
                )
            )
        self._finished = True
        return out


def sse(data: dict[str, Any] | str) -> bytes:
    """Frame one server-sent event: `data: <compact JSON>\\n\\n` for a dict, the string as-is
    otherwise (`sse("[DONE]") == SSE_DONE`); a multi-line string becomes one data line per line."""
    text = (
        data
        if isinstance(data, str)
        else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    )
    lines = re.split(r"\r\n|\r|\n", text)  # SSE's line ends only (not U+2028 and kin)
    return ("".join(f"data: {line}\n" for line in lines) + "\n").encode("utf-8")
