"""Schema-driven fuzzing of the ingress's HTTP API in process (schemathesis on the app's own
OpenAPI document, the mesh a test double): over 1,000 generated requests, valid and invalid by
the schema, none answered 5xx, every error in OpenAI's shape, every response as documented
(`openapi_fuzz` has the generation and the checks).

Bounded and reproducible: at most `EXAMPLES` examples per operation and generation mode, a
deadline per example, a fixed seed and no example database. Run it with
`.venv/bin/pytest tests/unit/ingress/test_ingress_fuzz_in_process.py -m slow -s` to see the
counts by status.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
import schemathesis
from conftest import FakeMesh, build_ingress
from openapi_fuzz import report, run_fuzz

pytestmark = pytest.mark.slow  # ~1,200 requests, ~30 s on 2 cores: over the fast tier's budget

EXAMPLES = {"POST": 300, "GET": 10, "DELETE": 10}  # per operation and generation mode
DEADLINE = timedelta(seconds=5)
MIN_REQUESTS = 1_000


def test_ingress_fuzz_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    app, _ = build_ingress(monkeypatch, FakeMesh())
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    counts = run_fuzz(schema, EXAMPLES, served_model="llama", deadline=DEADLINE)
    print("\n" + report(counts))
    assert sum(counts.values()) >= MIN_REQUESTS, report(counts)
    statuses = {int(key.rsplit(" ", 1)[1]) for key in counts}
    assert {200, 400, 404} <= statuses, report(counts)  # the fuzz got through admission too
