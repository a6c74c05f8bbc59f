"""Schema-driven fuzzing of the live mesh's HTTP API: the checks of the in-process fuzz test
(tests/unit/ingress/openapi_fuzz.py) against the session mesh's OpenAI endpoint. Over 1,000
generated requests, valid and invalid by the schema the ingress serves at /openapi.json: none
answered 5xx, every error in OpenAI's shape, every response as documented.

Bounded and reproducible: at most `EXAMPLES` per operation and generation mode, a fixed seed, no
example database. No per-example deadline: an admitted request may generate up to its
max_tokens on a simulated replica. Run with `-s` to see the counts by status.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
import schemathesis

MODEL = "llama-3.1-8b"  # served by the simulated replicas of the session mesh
EXAMPLES = {"POST": 250, "GET": 10, "DELETE": 10}  # per operation and generation mode
MIN_REQUESTS = 1_000


def _openapi_fuzz() -> ModuleType:
    """tests/unit/ingress/openapi_fuzz.py (the tests tree has no packages to import it by)."""
    path = Path(__file__).resolve().parents[1] / "unit" / "ingress" / "openapi_fuzz.py"
    spec = importlib.util.spec_from_file_location("ingress_openapi_fuzz", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ingress_fuzz_live_mesh(live_mesh: dict[str, Any]) -> None:
    fuzz = _openapi_fuzz()
    root = live_mesh["http"].removesuffix("/v1")  # the schema's paths start with /v1
    schema = schemathesis.openapi.from_url(f"{root}/openapi.json")
    counts = fuzz.run_fuzz(schema, EXAMPLES, served_model=MODEL, deadline=None, base_url=root)
    print("\n" + fuzz.report(counts))
    assert sum(counts.values()) >= MIN_REQUESTS, fuzz.report(counts)
    statuses = {int(key.rsplit(" ", 1)[1]) for key in counts}
    assert {200, 400, 404} <= statuses, fuzz.report(counts)


@pytest.mark.parametrize(
    ("path", "raw", "code"),
    [
        ("/chat/completions",
         '{"model": "llama-3.1-8b", "messages": [{"role": "user", "content": "\\ud800"}]}',
         "invalid_unicode"),
        ("/chat/completions", "[" * 5000 + "]" * 5000, "json_too_deep"),
        ("/chat/completions", '{"a":' * 3000 + "1" + "}" * 3000, "json_too_deep"),
        # vLLM's own answer: the prompt counted by its tokenizer, over the context
        ("/completions", '{"model": "llama-3.1-8b", "prompt": "' + "x" * 1_000_000 + '"}',
         400),
    ],
    ids=["lone-surrogate", "deep-array-5000", "deep-object-3000", "no-space-megabyte-prompt"],
)  # fmt: skip
def test_ingress_issue_17_findings_live(
    live_mesh: dict[str, Any], path: str, raw: str, code: str | int
) -> None:
    """The issue's findings, measured on the live mesh, now answer 400 in OpenAI's shape."""
    response = httpx.post(
        live_mesh["http"] + path,
        content=raw,
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert response.status_code == 400, response.text[:300]
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
