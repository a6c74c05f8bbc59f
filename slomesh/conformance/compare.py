"""Answers made comparable: what a response says, without what differs between any two runs of
the same server (ids, timestamps, fingerprints), and a stream reassembled per choice (text,
tool calls, logprobs, finish reason; usage), so two servers that chunk a stream differently but
say the same compare equal."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

VOLATILE_KEYS = frozenset(
    {"id", "created", "created_at", "system_fingerprint", "item_id", "response_id"}
)
"""Keys whose values differ between runs of one server: removed wherever they appear."""
_IDS = re.compile(r"\b(chatcmpl|cmpl|resp|msg|rs|fc|call|chatcmpl-tool)-[0-9A-Za-z-]+")


@dataclass(frozen=True)
class Answer:
    """One server's answer to a case, comparable: status and normalised content."""

    status: int
    content: Any


def normalise(value: Any) -> Any:
    """`value` without volatile keys; ids inside strings masked."""
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if isinstance(value, str):
        return _IDS.sub(r"\1-<id>", value)
    return value


def answer(status: int, body: bytes, stream: bool) -> Answer:
    """The comparable answer of a response (`stream`: server-sent events were asked for)."""
    text = body.decode("utf-8", "replace")
    if stream and status == 200:
        return Answer(status, normalise(reassemble(events(text))))
    try:
        return Answer(status, normalise(json.loads(text)))
    except ValueError:
        return Answer(status, text)


def events(text: str) -> list[Any]:
    """The JSON data of each server-sent event ("[DONE]" kept as the string)."""
    out: list[Any] = []
    for block in text.split("\n\n"):
        data = [ln[5:].strip() for ln in block.splitlines() if ln.startswith("data:")]
        if not data:
            continue
        raw = "\n".join(data)
        out.append(raw if raw == "[DONE]" else json.loads(raw))
    return out


def reassemble(stream: list[Any]) -> dict[str, Any]:
    """One stream's content: per choice index its text, reasoning, tool calls, logprobs and
    finish; the last usage; errors and the [DONE] marker; Responses' final response."""
    choices: dict[int, dict[str, Any]] = {}
    out: dict[str, Any] = {"done": "[DONE]" in stream, "errors": [], "usage": None}
    for event in stream:
        if not isinstance(event, dict):
            continue
        if "error" in event:
            out["errors"].append(event["error"])
        if event.get("type") == "response.completed":
            out["response"] = event.get("response")
        if event.get("usage") is not None:
            out["usage"] = event["usage"]
        for choice in event.get("choices") or ():
            _fold(choices.setdefault(int(choice.get("index", 0)), _empty()), choice)
    out["choices"] = [_merge_lists(choices[i]) for i in sorted(choices)]
    return out


def _merge_lists(acc: dict[str, Any]) -> dict[str, Any]:
    """A completions choice's logprobs pieces (parallel lists per chunk) as one set of lists."""
    pieces = acc["logprobs"]
    if pieces and all(isinstance(p, dict) and "tokens" in p for p in pieces):
        merged: dict[str, list[Any]] = {}
        for piece in pieces:
            for key, value in piece.items():
                merged.setdefault(key, []).extend(value or [])
        acc["logprobs"] = merged
    return acc


def _empty() -> dict[str, Any]:
    return {
        "text": "",
        "reasoning": "",
        "tool_calls": {},
        "logprobs": [],
        "finish_reason": None,
        "stop_reason": None,
        "token_ids": [],
    }


def _fold(acc: dict[str, Any], choice: dict[str, Any]) -> None:
    delta = choice.get("delta") or {}
    acc["text"] += delta.get("content") or choice.get("text") or ""
    acc["reasoning"] += delta.get("reasoning") or delta.get("reasoning_content") or ""
    for call in delta.get("tool_calls") or ():
        slot = acc["tool_calls"].setdefault(int(call.get("index", 0)), {"name": "", "args": ""})
        fn = call.get("function") or {}
        slot["name"] += fn.get("name") or ""
        slot["args"] += fn.get("arguments") or ""
    logprobs = choice.get("logprobs")
    if isinstance(logprobs, dict):
        if "content" in logprobs:
            acc["logprobs"].extend(logprobs.get("content") or [])
        else:  # completions: parallel lists, extended key by key
            acc["logprobs"].append(logprobs)
    acc["token_ids"].extend(choice.get("token_ids") or [])
    if choice.get("finish_reason") is not None:
        acc["finish_reason"] = choice["finish_reason"]
    if choice.get("stop_reason") is not None:
        acc["stop_reason"] = choice["stop_reason"]


def differences(reference: Answer, tested: Answer, limit: int = 3) -> list[str]:
    """Where `tested` differs from `reference` (paths and both values), at most `limit`."""
    if reference.status != tested.status:
        return [f"status {reference.status} != {tested.status}"]
    found: list[str] = []
    _diff(reference.content, tested.content, "", found, limit)
    return found


def _diff(a: Any, b: Any, path: str, found: list[str], limit: int) -> None:
    if len(found) >= limit:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            _diff(a.get(key, "<absent>"), b.get(key, "<absent>"), f"{path}.{key}", found, limit)
        return
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            found.append(f"{path or '.'}: {len(a)} items != {len(b)}")
            return
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, f"{path}[{i}]", found, limit)
        return
    if a != b:
        found.append(f"{path or '.'}: {_short(a)} != {_short(b)}")


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
