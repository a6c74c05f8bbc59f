"""The OpenAI Batch API's input format, config and object shapes (pure).

- `BatchConfig`: the ingress's `batch` args (storage directory, limits, runner knobs).
- `parse_batch_file`: a JSONL upload with purpose "batch" to its request lines; every rule
  broken is a 400 naming the line (1-based) and the field: a JSON object per line, `custom_id`
  a non-empty string unique in the file, `method` "POST", `url` /v1/chat/completions or
  /v1/completions, `body` a valid completion request of that endpoint (streaming is refused:
  a batch request's result is one JSON response).
- `parse_window`: a completion window such as "24h", "90m" or "600s" to seconds.
- `file_object` / `batch_object`: OpenAI's `file` and `batch` objects.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from services.ingress.core.errors import APIError, bad_request
from services.ingress.core.openai_schema import (
    ChatCompletionRequest,
    CompletionRequest,
    validate_body,
)

ENDPOINTS: dict[str, type[CompletionRequest] | type[ChatCompletionRequest]] = {
    "/v1/chat/completions": ChatCompletionRequest,
    "/v1/completions": CompletionRequest,
}
_WINDOW = re.compile(r"^([1-9][0-9]{0,6})([smh])$")
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0}


class BatchConfig(BaseModel):
    """The Batch API's storage and execution (the ingress's `batch` args)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    storage_dir: str = "~/.cache/slomesh/batches"
    """Directory of the SQLite store (`batches.sqlite3`): files, batches, the request journal
    and the run leases. Every ingress replica must see the same directory (local disk of one
    machine; SQLite locking is not safe on network file systems)."""
    max_file_bytes: int = Field(200 * 1024 * 1024, ge=1)
    """Largest upload, bytes (OpenAI's limit: 200 MB)."""
    max_requests_per_batch: int = Field(50_000, ge=1)
    """Most request lines in one batch input file (OpenAI's limit: 50,000)."""
    min_window_s: float = Field(60.0, gt=0)
    """Shortest completion_window accepted, seconds."""
    max_window_s: float = Field(86_400.0, gt=0)
    """Longest completion_window accepted, seconds (OpenAI accepts only "24h")."""
    max_concurrent_requests: int = Field(8, ge=1)
    """Batch requests one ingress replica keeps in admission or in flight at once (the cap of
    its additive-increase / multiplicative-decrease window, which halves on each 429)."""
    priority: int = 1000
    """vLLM priority of batch requests (lower is served first): the lowest by default."""
    criticality: int = -1
    """Band of batch requests (gateway convention: 1 critical, 0 standard, -1 sheddable): the
    scheduler serves higher bands first and sheds sheddable requests first when saturated
    (a shed batch request is retried later, not failed)."""
    lease_ttl_s: float = Field(30.0, gt=0)
    """A batch's run lease lasts this long unless renewed; a replica that dies holding it is
    replaced by another after at most this long."""
    poll_interval_s: float = Field(1.0, gt=0)
    """How often an idle runner looks for batches to run, seconds."""
    retry_min_s: float = Field(1.0, gt=0)
    """First wait before a request answered 429/503 is sent again, seconds (doubles per retry
    of that request, at least the answer's Retry-After)."""
    retry_max_s: float = Field(30.0, gt=0)
    """Longest wait between retries of one request, seconds."""
    early_fail_min_done: int = Field(20, ge=1)
    """Requests that must have finished before the progress rate may fail a batch early."""
    early_fail_min_elapsed_fraction: float = Field(0.1, ge=0, le=1)
    """Fraction of the window that must have elapsed before the progress rate may fail a
    batch early (the rate of the first minutes is mostly start-up)."""
    early_fail_slack: float = Field(1.5, ge=1)
    """A batch fails early when its remaining requests at the measured rate need more than
    this many times the time left in its window."""


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


def _check_line(line: int, data: Any, seen: set[str]) -> BatchLine:
    if not isinstance(data, dict):
        raise bad_request(None, "must be a JSON object")
    custom_id = data.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id or len(custom_id) > 512:
        raise bad_request("custom_id", "must be a non-empty string of at most 512 characters")
    if custom_id in seen:
        raise bad_request("custom_id", f"'{custom_id}' is not unique in the file")
    if data.get("method") != "POST":
        raise bad_request("method", f"must be 'POST', got {data.get('method')!r}")
    url = data.get("url")
    if url not in ENDPOINTS:
        raise bad_request("url", f"must be one of {', '.join(sorted(ENDPOINTS))}, got {url!r}")
    body = data.get("body")
    if not isinstance(body, dict):
        raise bad_request("body", "must be a JSON object (the request body)")
    parsed = validate_body(body, ENDPOINTS[url])
    if parsed.stream:
        raise bad_request("body.stream", "must be false: a batch request has one JSON result")
    seen.add(custom_id)
    return BatchLine(line, custom_id, url, body)


def parse_batch_file(content: bytes, config: BatchConfig) -> list[BatchLine]:
    """The request lines of a JSONL batch input file (blank lines skipped); APIError 400 naming
    the first bad line and field."""
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as err:
        rule = f"must be UTF-8 JSONL: {err.reason} at byte {err.start}"
        raise bad_request("file", rule) from None
    out: list[BatchLine] = []
    seen: set[str] = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        if len(out) >= config.max_requests_per_batch:
            raise bad_request(
                "file", f"holds more than {config.max_requests_per_batch} requests (the limit)"
            )
        try:
            data = json.loads(raw)
        except (json.JSONDecodeError, RecursionError) as err:
            raise bad_request(f"line {number}", f"is not valid JSON: {err}") from None
        try:
            out.append(_check_line(number, data, seen))
        except APIError as err:
            raise _line_error(number, err) from None
    if not out:
        raise bad_request("file", "holds no request lines")
    return out


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
        "expires_at": None,
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
