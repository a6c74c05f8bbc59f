"""Schemathesis fuzzing of the ingress's HTTP API, shared by the in-process test
(tests/unit/ingress/test_ingress_fuzz_in_process.py) and the live-mesh one
(tests/integration/test_ingress_fuzz.py): the same generation, bounds and checks.

Every operation of the OpenAPI document is fuzzed with schema-valid (positive) and
schema-invalid (negative) requests, seeded and without an example database (reproducible), at
most `examples[method]` per operation and mode. Each response must be: no 5xx; an error in
OpenAI's shape; a stream ending with [DONE]; and pass schemathesis's checks (status code, content
type and body as documented, schema-violating requests rejected).
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

SEED = 20_170_005
# No negative-data check: vLLM judges the bodies, and its leniency wins where the documented
# schema is stricter (it coerces "5" to 5, serves a request without `model`), so a body the
# schema calls invalid may rightly be served.
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def assert_openai_error_body(error_body: Any) -> None:
    """`{"error": {"message": str, "type": str, "param": str|null, "code": str|int|null}}`:
    OpenAI's shape; vLLM's own errors carry the HTTP status as an integer code."""
    assert isinstance(error_body, dict) and set(error_body) == {"error"}, error_body
    error = error_body["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert isinstance(error["message"], str) and error["message"], error
    assert isinstance(error["type"], str) and error["type"], error
    assert error["param"] is None or isinstance(error["param"], str), error
    assert error["code"] is None or isinstance(error["code"], str | int), error


def header(response: Any, name: str) -> str:
    """A response header (schemathesis keeps lists of values; httpx/requests a string)."""
    for key, value in response.headers.items():
        if key.lower() == name:
            return str(value[0] if isinstance(value, list) else value)
    return ""


def check_openai_response(response: Any) -> None:
    """No 5xx; an error is OpenAI's JSON; a stream ends with [DONE] and any error event in it
    is OpenAI-shaped too."""
    status = response.status_code
    text = response.content.decode("utf-8", "replace")
    assert status < 500, f"{status}: {text[:300]}"
    content_type = header(response, "content-type")
    if status >= 400:
        assert content_type.startswith("application/json"), content_type
        assert_openai_error_body(json.loads(response.content))
    elif content_type.startswith("text/event-stream"):
        events = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
        if not getattr(response, "stream_cut_short", False):
            assert events and events[-1] == "[DONE]", events[-3:]
        for event in events:
            data = json.loads(event) if event != "[DONE]" else {}
            if "error" in data:
                assert_openai_error_body(data)


def run_fuzz(
    schema: Any,
    examples: dict[str, int],
    served_model: str | None,
    deadline: timedelta | None,
    **call: Any,
) -> Counter[str]:
    """Fuzz every operation of `schema` in both generation modes (positive only where there
    is nothing to make invalid: no body, no parameters); returns request counts by
    "METHOD path status". `served_model` replaces the generated `model` in about half the
    valid bodies, so requests also get past the model check into admission and the mesh."""
    counts: Counter[str] = Counter()
    for result in schema.get_all_operations():
        operation = result.ok()
        negatable = bool(operation.body) or any(True for _ in operation.iter_parameters())
        modes = [GenerationMode.POSITIVE] + ([GenerationMode.NEGATIVE] if negatable else [])
        for mode in modes:
            fuzzer(operation, mode, examples, served_model, deadline, counts, call)()
    return counts


def fuzzer(
    operation: Any,
    mode: GenerationMode,
    examples: dict[str, int],
    served_model: str | None,
    deadline: timedelta | None,
    counts: Counter[str],
    call: dict[str, Any],
) -> Any:
    """One bounded, seeded Hypothesis run over `operation`'s generated cases."""
    label = f"{operation.method.upper()} {operation.path}"
    serve_model = served_model if mode is GenerationMode.POSITIVE else None  # keep negations

    @seed(SEED)
    @settings(
        max_examples=examples[operation.method.upper()],
        deadline=deadline,
        database=None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )
    @given(case=operation.as_strategy(generation_mode=mode), serve=st.booleans())
    def fuzz(case: Any, serve: bool) -> None:
        if serve and serve_model and isinstance(case.body, dict) and "model" in case.body:
            case.body["model"] = serve_model
        response = case.call(**call)
        counts[f"{label} {response.status_code}"] += 1
        check_openai_response(response)
        case.validate_response(response, checks=CHECKS)

    return fuzz


def report(counts: Counter[str]) -> str:
    """Request counts by status, then by operation and status."""
    by_status: Counter[int] = Counter()
    for key, n in counts.items():
        by_status[int(key.rsplit(" ", 1)[1])] += n
    lines = [f"{sum(counts.values())} requests; by status: {dict(sorted(by_status.items()))}"]
    lines += [f"  {key}: {n}" for key, n in sorted(counts.items())]
    return "\n".join(lines)
