"""Readiness at the ingress: /health and /v1/models answer 503 with Retry-After in OpenAI's error
shape until the scheduler reports a ready replica for every configured model; /v1/models then
lists them whether or not the replicas have room, /health only while they have."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.unit.ingress.conftest import MODELS, FakeMesh, build_ingress
from tests.unit.ingress.openapi_fuzz import assert_openai_error_body

LLAMA, QWEN = (m["name"] for m in MODELS)


def _client(monkeypatch: pytest.MonkeyPatch, mesh: FakeMesh) -> TestClient:
    app, _ = build_ingress(monkeypatch, mesh)
    return TestClient(app, raise_server_exceptions=False)


def _assert_503_retry(response: object, *fragments: str) -> None:
    assert response.status_code == 503, response.text  # type: ignore[attr-defined]
    assert response.headers["retry-after"] == "1"  # type: ignore[attr-defined]
    body = response.json()  # type: ignore[attr-defined]
    assert_openai_error_body(body)
    assert body["error"]["code"] == "server_overloaded"
    for fragment in fragments:
        assert fragment in body["error"]["message"], body


@pytest.mark.parametrize("path", ["/health", "/v1/models"])
@pytest.mark.parametrize(
    ("ready", "waiting"), [((), f"'{LLAMA}', '{QWEN}'"), ((QWEN,), f"'{LLAMA}'")]
)
def test_not_ready_until_every_model_has_a_ready_replica(
    monkeypatch: pytest.MonkeyPatch, path: str, ready: tuple[str, ...], waiting: str
) -> None:
    client = _client(monkeypatch, FakeMesh(ready=ready))
    _assert_503_retry(client.get(path), "starting", waiting)


def test_ready_lists_every_model(monkeypatch: pytest.MonkeyPatch) -> None:
    client = _client(monkeypatch, FakeMesh())
    assert client.get("/health").json() == {"status": "ok"}
    models = client.get("/v1/models")
    assert models.status_code == 200
    assert [m["id"] for m in models.json()["data"]] == [LLAMA, QWEN]


def test_full_replicas_fail_health_but_models_still_list(monkeypatch: pytest.MonkeyPatch) -> None:
    client = _client(monkeypatch, FakeMesh(admit=False))
    _assert_503_retry(client.get("/health"), "every replica full")
    assert client.get("/v1/models").status_code == 200


@pytest.mark.parametrize("path", ["/health", "/v1/models"])
def test_scheduler_unreachable_is_503(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    client = _client(monkeypatch, FakeMesh(down=("scheduler",)))
    _assert_503_retry(client.get(path), "scheduler unavailable: UNAVAILABLE")
