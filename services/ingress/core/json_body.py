"""Decoding an untrusted JSON request body, with limits checked before and while parsing.

Rules, in order, each an OpenAI-shaped `APIError` naming the rule:
1. **Size.** More than `max_body_bytes` bytes is 413 (`request_too_large`).
2. **Nesting depth.** More than `max_json_depth` nested arrays/objects is 400 (`json_too_deep`).
   The depth is measured without recursion and before `json.loads` (whose C decoder recurses
   once per level: a 5,000-deep array raises RecursionError): strings are cut out by one
   left-to-right regex pass (linear, even for unterminated strings), then the brackets left are
   counted.
3. **Syntax.** Malformed JSON, an integer literal over Python's 4,300-digit limit, or anything
   else `json.loads` refuses is 400 "request body is not valid JSON".
4. **Unicode.** The body is decoded as UTF-8 with invalid bytes kept as lone surrogates
   (U+DC80-U+DCFF); any string or object key holding a lone surrogate (an invalid UTF-8 byte,
   or a "\\ud800" escape with no partner) is 400 `invalid_unicode` naming the field. Such a
   string cannot be encoded as UTF-8, so it would fail later, deep in the mesh.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

from services.ingress.core.errors import (
    body_too_large,
    invalid_json,
    invalid_unicode,
    json_too_deep,
)

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
"""Default `max_body_bytes`: a 4 MiB body holds a prompt of ~1M tokens, past any context."""
DEFAULT_MAX_JSON_DEPTH = 64
"""Default `max_json_depth`: OpenAI bodies nest 4 levels (tool schemas a few more)."""

# A JSON string: a quote, then runs of plain characters and escape pairs, then an optional
# closing quote. The closing quote is optional so an unterminated string ends the match at the
# end of the text instead of making the search restart at every later quote (quadratic).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_DELTA = {"[": 1, "{": 1, "]": -1, "}": -1}
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # \ud800-\udfff, paired or not


def nesting_depth(text: str) -> int:
    """Deepest nesting of arrays/objects in a JSON text, brackets inside strings excluded.

    Linear time, no recursion. For malformed JSON it is a bound, not an exact figure."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    if not brackets:
        return 0
    return max(0, max(accumulate(map(_DELTA.__getitem__, brackets))))


def decode_json(
    raw: bytes | str,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
) -> Any:
    """The decoded JSON value of a request body, checked against the rules of this module."""
    size = len(raw) if isinstance(raw, bytes) else len(raw.encode("utf-8", "surrogatepass"))
    if size > max_body_bytes:
        raise body_too_large(size, max_body_bytes)
    text = raw.decode("utf-8", "surrogateescape") if isinstance(raw, bytes) else raw
    opens = text.count("[") + text.count("{")
    if opens > max_json_depth:  # fewer brackets than the limit cannot nest past it
        depth = nesting_depth(text)
        if depth > max_json_depth:
            raise json_too_deep(depth, max_json_depth)
    try:
        data = json.loads(text)
    except RecursionError:  # only if the stack was already deep: the depth is bounded above
        raise json_too_deep(max_json_depth + 1, max_json_depth) from None
    except ValueError as err:  # JSONDecodeError, over-long integer literals
        raise invalid_json(_printable(str(err))) from None
    if _SURROGATE.search(text) or _SURROGATE_ESCAPE.search(text):  # else nothing to find
        check_unicode(data)
    return data


def check_unicode(data: Any) -> None:
    """Raise 400 invalid_unicode naming the first field (document order) whose key or string
    value holds a lone surrogate. Iterative: no recursion whatever the depth."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            _check_text(path, value, "string")
        elif isinstance(value, dict):
            children: list[tuple[str, Any]] = []
            for key, item in value.items():
                _check_text(path, key, "object key")
                children.append((f"{path}.{key}" if path else key, item))
            stack.extend(reversed(children))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", item) for i, item in reversed(list(enumerate(value))))


def _check_text(path: str, text: str, what: str) -> None:
    found = _SURROGATE.search(text)
    if found is None:
        return
    char = ord(found.group())
    raise invalid_unicode(
        path or None,
        f"{what} must be valid Unicode: U+{char:04X} at character {found.start()} is a lone "
        "surrogate or an invalid UTF-8 byte",
    )


def _printable(text: str) -> str:
    """`text` with lone surrogates (echoed input) replaced, so the error body encodes."""
    return _SURROGATE.sub("\ufffd", text)
