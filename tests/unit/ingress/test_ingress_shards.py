"""The ingress with several scheduler shards (shard_router.py, shard_admission.py): a shard
that does not answer sends its request to the next shard at once and no later request goes
there; the request's Report goes to the shard that admitted it; Health is every shard's."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from conftest import FakeMesh, build_ingress
from fastapi.testclient import TestClient

from shared.rpc.client import CallFailed

BODY = {"model": "llama", "prompt": "hello", "max_tokens": 3, "stream": True}
SHARDS = {"scheduler": {"shards": ["scheduler", "scheduler-1"]}}


def _stream(client: TestClient) -> None:
    with client.stream("POST", "/v1/completions", json=BODY) as r:
        assert r.status_code == 200
        assert "data: [DONE]" in "".join(r.iter_text())


def _reports(mesh: FakeMesh) -> list[str]:
    return [app for app, method in mesh.calls if method == "Report"]


def test_a_dead_shards_requests_are_admitted_by_the_next_and_reported_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mesh = FakeMesh(down=("scheduler",))
    app, instance = build_ingress(monkeypatch, mesh, **SHARDS)
    with TestClient(app, raise_server_exceptions=False) as client:
        for _ in range(4):
            _stream(client)
        deadline = time.monotonic() + 5
        while len(_reports(mesh)) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
    admits = [a for a, m in mesh.calls if m == "Admit"]
    assert admits.count("scheduler-1") == 4
    assert admits.count("scheduler") <= 1  # tried once at most: down from then on
    assert _reports(mesh) == ["scheduler-1"] * 4
    assert instance.pipeline.shards.is_down("scheduler")


@pytest.mark.parametrize(
    ("down", "status"), [(("scheduler",), 200), (("scheduler", "scheduler-1"), 503)]
)
def test_health_is_ready_when_any_shard_is(
    monkeypatch: pytest.MonkeyPatch, down: tuple[str, ...], status: int
) -> None:
    mesh = FakeMesh(down=down)
    app, _ = build_ingress(monkeypatch, mesh, **SHARDS)
    with TestClient(app, raise_server_exceptions=False) as client:
        assert client.get("/health").status_code == status


def test_every_request_is_admitted_and_reported_on_the_same_shard(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mesh = FakeMesh()
    app, instance = build_ingress(monkeypatch, mesh, **SHARDS)
    with TestClient(app, raise_server_exceptions=False) as client:
        for _ in range(8):
            _stream(client)
        deadline = time.monotonic() + 5
        while len(_reports(mesh)) < 8 and time.monotonic() < deadline:
            time.sleep(0.01)
    admits = sorted(a for a, m in mesh.calls if m == "Admit")
    assert admits == sorted(_reports(mesh))
    assert set(admits) <= {"scheduler", "scheduler-1"}
    assert not instance.pipeline.admitted_by  # every request's entry went with its report


class HangingShardMesh(FakeMesh):
    """`scheduler` died with Serve still queueing calls for it: Admit never answers there and
    its Health times out (UNAVAILABLE here); `scheduler-1` answers."""

    async def call(
        self, application: str, kind: str, method: str, message: Any, timeout_s: Any = None
    ) -> Any:
        if application == "scheduler" and method == "Admit":
            self.calls.append((application, method))
            await asyncio.Event().wait()
        if application == "scheduler" and method == "Health":
            self.calls.append((application, method))
            raise CallFailed(application, "UNAVAILABLE", "health timed out")
        return await super().call(application, kind, method, message, timeout_s)


def test_an_admission_pending_on_a_shard_found_down_goes_to_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mesh = HangingShardMesh()
    app, instance = build_ingress(monkeypatch, mesh, **SHARDS)
    with TestClient(app, raise_server_exceptions=False) as client:
        for _ in range(3):
            _stream(client)
    admits = [a for a, m in mesh.calls if m == "Admit"]
    assert admits.count("scheduler-1") == 3
    assert instance.pipeline.shards.is_down("scheduler")
