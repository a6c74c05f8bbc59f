"""The ingress's guard on delivered latency, through its HTTP API: a request predicted to miss
its TTFT objective is 429 before any internal call; a request let in is counted while it runs
and its stream leaves its samples."""

from __future__ import annotations

import time
from typing import Any

import pytest
from conftest import FakeMesh, build_ingress
from fastapi.testclient import TestClient


def _chat(cls: str) -> dict[str, Any]:
    return {"model": "llama", "messages": [{"role": "user", "content": "hi"}], "slo": cls}


def test_a_request_predicted_late_is_429_before_any_call(monkeypatch: pytest.MonkeyPatch) -> None:
    mesh = FakeMesh()
    app, instance = build_ingress(monkeypatch, mesh)
    guard = instance.pipeline.delivered.guard
    # a chat request let in 5 s ago still has no first token: a new one would wait as long
    guard.start("stuck", "llama", 1.0, time.monotonic() - 5.0)
    with TestClient(app, raise_server_exceptions=False) as client:
        late = client.post("/v1/chat/completions", json=_chat("chat"))
        calls_after = list(mesh.calls)
        loose = client.post("/v1/chat/completions", json=_chat("batch"))
    assert late.status_code == 429
    assert late.headers["x-slomesh-drop-reason"] == "deadline-infeasible"
    assert int(late.headers["retry-after"]) >= 4
    assert "predicted TTFT" in late.json()["error"]["message"]
    assert calls_after == []  # neither the predictor nor the scheduler was asked
    assert loose.status_code == 200  # a looser objective is not held by it
    assert guard.rejected == 1


def test_a_streamed_request_leaves_its_samples_and_a_whole_answer_only_its_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app, instance = build_ingress(monkeypatch, FakeMesh())
    guard = instance.pipeline.delivered.guard
    with TestClient(app, raise_server_exceptions=False) as client:
        whole = client.post("/v1/chat/completions", json=_chat("chat"))
        assert whole.status_code == 200 and guard.in_flight("llama") == 0
        ttft, _, _ = guard.predict("llama", 1.0, time.monotonic())
        assert ttft is None  # its first token came with its last: no TTFT sample
        streamed = client.post("/v1/chat/completions", json={**_chat("chat"), "stream": True})
        assert streamed.status_code == 200 and "data:" in streamed.text
    assert guard.in_flight("llama") == 0
    ttft, _, load = guard.predict("llama", 1.0, time.monotonic())
    assert ttft is not None and load == 1


def test_disabled_it_lets_everything_through(monkeypatch: pytest.MonkeyPatch) -> None:
    app, instance = build_ingress(monkeypatch, FakeMesh(), delivered_guard={"enabled": False})
    instance.pipeline.delivered.guard.start("stuck", "llama", 1.0, time.monotonic() - 5.0)
    with TestClient(app, raise_server_exceptions=False) as client:
        assert client.post("/v1/chat/completions", json=_chat("chat")).status_code == 200
