"""A stream its replica never accepts is admitted again elsewhere before any token is sent."""

from __future__ import annotations

import pytest
from conftest import FakeMesh, build_ingress
from fastapi.testclient import TestClient

BODY = {"model": "llama", "prompt": "hello", "max_tokens": 3, "stream": True}


def _stream_text(client: TestClient) -> str:
    with client.stream("POST", "/v1/completions", json=BODY) as r:
        assert r.status_code == 200
        return "".join(r.iter_text())


def test_a_request_whose_replica_is_gone_is_served_by_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mesh = FakeMesh(down=("replica-0",), admit_to=("replica-0", "replica-1"))
    app, _ = build_ingress(monkeypatch, mesh)
    with TestClient(app, raise_server_exceptions=False) as client:
        text = _stream_text(client)
    assert '"error"' not in text and "data: [DONE]" in text
    methods = [c for c in mesh.calls if c[1] in ("Admit", "Report", "Generate")]
    # admitted to the dead replica, its seat given back, admitted again, served by replica-1
    assert methods[:4] == [
        ("scheduler", "Admit"),
        ("replica-0", "Generate"),
        ("scheduler", "Report"),
        ("scheduler", "Admit"),
    ]
    assert ("replica-1", "Generate") in mesh.calls


def test_readmission_gives_up_with_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM's response never started: the client gets an error in OpenAI's shape (not a 200
    stream) naming the replica."""
    mesh = FakeMesh(down=("replica-0",))  # every admission lands on the dead replica
    app, instance = build_ingress(monkeypatch, mesh)
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.post("/v1/completions", json=BODY)
    # nothing reached an engine: a retryable 503 with Retry-After, naming the replica
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"]
    error = response.json()["error"]
    assert "no replica accepted" in error["message"] and "replica-0" in error["message"]
    admits = sum(1 for c in mesh.calls if c[1] == "Admit")
    assert admits == 1 + instance.pipeline.args.accept_retries
