"""A scheduler failure that retrying cannot fix is answered at once: the ingress retries
scheduler.Admit only while the scheduler is UNAVAILABLE (gone or restarting), so a callee's
own exception over a Serve handle (INVALID_ARGUMENT, INTERNAL) is one Admit call and a 503."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from ray import exceptions as rex

from shared.rpc.client import MeshClient
from shared.rpc.slomesh.v1 import common_pb2
from tests.unit.ingress.conftest import FakeMesh, build_ingress


class _Awaitable:
    def __init__(self, outcome: Any) -> None:
        self.outcome = outcome

    def __await__(self) -> Any:
        async def result() -> Any:
            if isinstance(self.outcome, BaseException):
                raise self.outcome
            return self.outcome

        return result().__await__()


class _Handle:
    """A Serve handle whose methods answer from `answers` (method -> outcome)."""

    def __init__(self, answers: dict[str, Any], calls: list[str]) -> None:
        self.answers, self.calls = answers, calls

    def __getattr__(self, method: str) -> Any:
        handle = self

        class _Remote:
            def remote(self, message: Any = None, trace_headers: Any = None) -> _Awaitable:
                handle.calls.append(method)
                return _Awaitable(handle.answers.get(method, RuntimeError(method)))

        return _Remote()


@pytest.mark.parametrize(
    ("failure", "code"),
    [
        (
            rex.RayTaskError("Admit", "tb", ValueError("meta.slo")).as_instanceof_cause(),
            "INVALID_ARGUMENT",
        ),
        (rex.RayTaskError("Admit", "tb", KeyError("x")).as_instanceof_cause(), "INVALID_ARGUMENT"),
        (rex.RayTaskError("Admit", "tb", RuntimeError("bug")).as_instanceof_cause(), "INTERNAL"),
    ],
)
def test_a_deterministic_admit_failure_is_not_retried(
    monkeypatch: pytest.MonkeyPatch, failure: BaseException, code: str
) -> None:
    app, instance = build_ingress(monkeypatch, FakeMesh(), admit_timeout_s=30.0)
    calls: list[str] = []
    client = MeshClient(timeout_s=5.0)
    prediction = common_pb2.LengthPrediction(mean_tokens=4.0, p50_tokens=4.0, p90_tokens=8.0)
    client._handles["predictor"] = _Handle({"Predict": prediction}, calls)
    client._handles["scheduler"] = _Handle({"Admit": failure}, calls)
    instance.pipeline.client = client
    with TestClient(app, raise_server_exceptions=False) as http:
        response = http.post(
            "/v1/completions", json={"model": "llama", "prompt": "hi", "max_tokens": 4}
        )
    assert response.status_code == 503
    assert code in response.json()["error"]["message"]
    assert calls.count("Admit") == 1  # answered at once, not retried for admit_timeout_s
