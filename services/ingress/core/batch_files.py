"""The OpenAI Batch API's input format and object shapes (pure).

- `LineChecker`: a JSONL input file with purpose "batch", fed in pieces as it arrives, to its
  request lines; every rule broken is a 400 naming the line (1-based) and the field: UTF-8, a
  JSON object per line of at most `max_line_bytes`, `custom_id` a non-empty string unique in
  the file, `method` "POST", `url` /v1/chat/completions or /v1/completions, `body` a valid
  completion request of that endpoint (streaming is refused: a batch request's result is one
  JSON response); at most `max_requests_per_batch` lines. It holds one partial line and a
  16-byte digest per custom_id, never the file. `parse_batch_file` is it over whole bytes,
  `read_input_file` over a stored file read in pieces.
- `parse_window`: a completion window such as "24h", "90m" or "600s" to seconds.
- `file_object` / `deleted_file_object` / `batch_object`: OpenAI's object shapes.

`BatchConfig` (core/batch_config.py) is re-exported here.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from services.ingress.core.batch_config import BatchConfig
from services.ingress.core.errors import APIError, bad_request

__all__ = [
    "ENDPOINTS",
    "BatchConfig",
    "BatchLine",
    "EndpointMismatch",
    "LineChecker",
    "batch_object",
    "deleted_file_object",
    "file_object",
    "parse_batch_file",
    "parse_window",
    "read_input_file",
]

ENDPOINTS = ("/v1/chat/completions", "/v1/completions")
"""Routes a batch line may name. The line's body is vLLM's to judge when the line runs, as the
same request online is (a body vLLM refuses is that line's error response)."""
_WINDOW = re.compile(r"^([1-9][0-9]{0,6})([smh])$")
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True, slots=True)
class BatchLine:
    """One validated request line of a batch input file."""

    line: int
    custom_id: str
    url: str
    body: dict[str, Any]


def parse_window(window: str, config: BatchConfig) -> float:
    """`completion_window` ("24h", "90m", "600s") in seconds; 400 outside the config's range."""
    match = _WINDOW.match(window) if isinstance(window, str) else None
    if match is None:
        raise bad_request(
            "completion_window", f"must look like '24h', '90m' or '600s', got {window!r}"
        )
    seconds = int(match.group(1)) * _UNIT_S[match.group(2)]
    if not config.min_window_s <= seconds <= config.max_window_s:
        raise bad_request(
            "completion_window",
            f"must be between {config.min_window_s:g} s and {config.max_window_s:g} s, "
            f"got {window!r}",
        )
    return seconds


def _line_error(line: int, err: APIError) -> APIError:
    param = f"line {line}" + (f": {err.param}" if err.param else "")
    return APIError(400, f"line {line}: {err.message}", err.type, param, "invalid_batch_line")


def _check_line(line: int, data: Any, seen: set[bytes]) -> BatchLine:
    if not isinstance(data, dict):
        raise bad_request(None, "must be a JSON object")
    custom_id = data.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id or len(custom_id) > 512:
        raise bad_request("custom_id", "must be a non-empty string of at most 512 characters")
    digest = hashlib.blake2b(custom_id.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    if digest in seen:
        raise bad_request("custom_id", f"'{custom_id}' is not unique in the file")
    if data.get("method") != "POST":
        raise bad_request("method", f"must be 'POST', got {data.get('method')!r}")
    url = data.get("url")
    if url not in ENDPOINTS:
        raise bad_request("url", f"must be one of {', '.join(sorted(ENDPOINTS))}, got {url!r}")
    body = data.get("body")
    if not isinstance(body, dict):
        raise bad_request("body", "must be a JSON object (the request body)")
    if body.get("stream") is True:
        raise bad_request("body.stream", "must be false: a batch request has one JSON result")
    seen.add(digest)
    return BatchLine(line, custom_id, url, body)


class LineChecker:
    """Validates a JSONL batch input file fed in pieces (`feed`, then `finish`), yielding its
    request lines as they complete (blank lines skipped); APIError 400 naming the first bad
    line and field. Lines end with "\n" (a "\r" before it is dropped)."""

    def __init__(self, config: BatchConfig) -> None:
        self.config = config
        self.lines = 0
        """Request lines so far."""
        self._number = 0
        self._partial = bytearray()
        self._seen: set[bytes] = set()

    def feed(self, data: bytes) -> Iterator[BatchLine]:
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                break
            if self._partial:
                self._partial += data[start:end]
                raw, self._partial = bytes(self._partial), bytearray()
            else:
                raw = data[start:end]
            start = end + 1
            self._too_long(len(raw))
            line = self._line(raw)
            if line is not None:
                yield line
        self._partial += data[start:]
        self._too_long(len(self._partial))

    def finish(self) -> Iterator[BatchLine]:
        if self._partial:
            raw, self._partial = bytes(self._partial), bytearray()
            line = self._line(raw)
            if line is not None:
                yield line
        if not self.lines:
            raise bad_request("file", "holds no request lines")

    def _too_long(self, size: int) -> None:
        if size > self.config.max_line_bytes:
            raise bad_request(
                f"line {self._number + 1}",
                f"is longer than {self.config.max_line_bytes} bytes (batch.max_line_bytes)",
            )

    def _line(self, raw: bytes) -> BatchLine | None:
        self._number += 1
        number = self._number
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            rule = f"must be UTF-8 JSONL: {err.reason} at byte {err.start} of the line"
            raise bad_request(f"line {number}", rule) from None
        if not text.strip():
            return None
        if self.lines >= self.config.max_requests_per_batch:
            raise bad_request(
                "file",
                f"holds more than {self.config.max_requests_per_batch} requests "
                "(batch.max_requests_per_batch)",
            )
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as err:
            raise bad_request(f"line {number}", f"is not valid JSON: {err}") from None
        try:
            line = _check_line(number, data, self._seen)
        except APIError as err:
            raise _line_error(number, err) from None
        self.lines += 1
        return line


def parse_batch_file(content: bytes, config: BatchConfig) -> list[BatchLine]:
    """The request lines of a whole JSONL batch input file (`LineChecker` over one piece)."""
    checker = LineChecker(config)
    return [*checker.feed(content), *checker.finish()]


_READ_BYTES = 1024 * 1024


class EndpointMismatch(Exception):
    """Lines whose url is not the batch's endpoint (up to 100 of them, as batch errors)."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(f"{len(errors)} lines target another endpoint")
        self.errors = errors


def read_input_file(path: str, config: BatchConfig, endpoint: str) -> Iterator[BatchLine]:
    """The validated lines of the input file at `path`, read in pieces of 1 MiB; after the
    last one, EndpointMismatch when some line's url is not `endpoint`."""
    checker = LineChecker(config)
    wrong: list[dict[str, Any]] = []

    def keep(lines: Iterable[BatchLine]) -> Iterator[BatchLine]:
        for x in lines:
            if x.url != endpoint:
                if len(wrong) < 100:
                    wrong.append(
                        {
                            "code": "mismatched_endpoint",
                            "message": f"url {x.url} does not match the batch endpoint {endpoint}",
                            "param": "url",
                            "line": x.line,
                        }
                    )
                continue
            yield x

    with open(path, "rb") as f:
        while piece := f.read(_READ_BYTES):
            yield from keep(checker.feed(piece))
    yield from keep(checker.finish())
    if wrong:
        raise EndpointMismatch(wrong)


def file_object(row: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's `file` object from a stored file row."""
    return {
        "id": row["id"],
        "object": "file",
        "bytes": row["bytes"],
        "created_at": int(row["created_at"]),
        "filename": row["filename"],
        "purpose": row["purpose"],
        "status": "processed",
        "expires_at": int(row["expires_at"]) if row.get("expires_at") else None,
        "status_details": None,
    }


_TIMES = (
    "in_progress_at",
    "expires_at",
    "finalizing_at",
    "completed_at",
    "failed_at",
    "expired_at",
    "cancelling_at",
    "cancelled_at",
)


def deleted_file_object(file_id: str) -> dict[str, Any]:
    """OpenAI's answer to `DELETE /v1/files/{id}`."""
    return {"id": file_id, "object": "file", "deleted": True}


def batch_object(row: dict[str, Any], counts: dict[str, int]) -> dict[str, Any]:
    """OpenAI's `batch` object from a stored batch row and its request counts."""
    errors = json.loads(row["errors"]) if row["errors"] else None
    out: dict[str, Any] = {
        "id": row["id"],
        "object": "batch",
        "endpoint": row["endpoint"],
        "errors": {"object": "list", "data": errors} if errors else None,
        "input_file_id": row["input_file_id"],
        "completion_window": row["completion_window"],
        "status": row["status"],
        "output_file_id": row["output_file_id"],
        "error_file_id": row["error_file_id"],
        "created_at": int(row["created_at"]),
        "request_counts": counts,
        "metadata": json.loads(row["metadata"]) if row["metadata"] else None,
    }
    for name in _TIMES:
        value = row[name]
        out[name] = int(value) if value is not None else None
    return out
