"""The ingress's fast path in process (fast_path.py): with a lease credit a request goes straight
to the replica, with no Predict or Admit before its stream; the scheduler is told of the
placement (in a `Sync` batch, recorded here as `Place`) before its report, and the prediction
runs after the first token (sent with the completions in predictor.Batch calls). Without a
credit (no grant yet, or a grant with none left) the full path: Predict, then Admit."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from conftest import FakeMesh, build_ingress
from fastapi.testclient import TestClient

from shared.rpc.convert import REPLICA_UNAVAILABLE
from shared.rpc.slomesh.v1 import common_pb2, scheduler_pb2

BODY = {"model": "llama", "prompt": "hello", "max_tokens": 3, "stream": True}


class LeasingMesh(FakeMesh):
    """FakeMesh plus a scheduler that grants `credits` on replica-1 (cumulative limit), one
    more for each finished request on replica-1 it has heard of (its seat is free again)."""

    def __init__(self, credits: int) -> None:
        super().__init__()
        self.credits = credits
        self.freed = 0

    async def call(
        self, application: str, kind: str, method: str, message: Any, timeout_s: Any = None
    ) -> Any:
        if (kind, method) in (("scheduler", "Lease"), ("scheduler", "Place")):
            self.calls.append((application, method))
            return self.grant()
        if (kind, method) == ("scheduler", "Report") and message.replica.application == "replica-1":
            self.freed += 1
        return await super().call(application, kind, method, message, timeout_s)

    def grant(self) -> scheduler_pb2.LeaseGrant:
        ref = common_pb2.ReplicaRef(application="replica-1", gpu="cpu", model="llama")
        limit = self.credits + self.freed if self.credits else 0
        credit = scheduler_pb2.ReplicaCredit(replica=ref, limit=limit)
        return scheduler_pb2.LeaseGrant(epoch="e1", credits=[credit], ttl_s=60.0)


def _stream(client: TestClient) -> None:
    with client.stream("POST", "/v1/completions", json=BODY) as r:
        assert r.status_code == 200
        assert "data: [DONE]" in "".join(r.iter_text())


def _wait_for(mesh: FakeMesh, call: tuple[str, str], count: int) -> None:
    _wait_until(lambda: mesh.calls.count(call) >= count)


def _wait_until(done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 5
    while not done() and time.monotonic() < deadline:
        time.sleep(0.01)


# one credit serves both requests: one at a time, each finished one's seat is free again (the
# ingress refills it at once, the scheduler's next grant counts it)
@pytest.mark.parametrize(("credits", "fast"), [(5, 2), (1, 2), (0, 0)])
def test_requests_on_credit_skip_predict_and_admit(
    monkeypatch: pytest.MonkeyPatch, credits: int, fast: int
) -> None:
    mesh = LeasingMesh(credits)
    app, _ = build_ingress(monkeypatch, mesh)
    with TestClient(app, raise_server_exceptions=False) as client:
        _stream(client)  # no grant yet: the full path, and the grant is asked for
        _wait_for(mesh, ("scheduler", "Sync"), 1)  # an empty one: a grant
        assert [c for c in mesh.calls if c[1] != "Sync"][:3] == [
            ("predictor", "Predict"),
            ("scheduler", "Admit"),
            ("replica-0", "Generate"),
        ]
        _wait_for(mesh, ("scheduler", "Report"), 1)  # batched: sent within its interval
        # the first request's completion reaches the predictor in a batch of its own, before
        # the requests counted below (on a loaded host it could land after their streams open)
        _wait_until(lambda: sum(k == "observe" for k, _, _ in mesh.fed) == 1)
        start = len(mesh.calls)
        _stream(client)
        _stream(client)
        _wait_for(mesh, ("scheduler", "Report"), 3)
        _wait_until(lambda: sum(k == "observe" for k, _, _ in mesh.fed) == 3)
    later = mesh.calls[start:]
    fed_predictions = [k for k, _, _ in mesh.fed].count("predict")
    assert later.count(("replica-1", "Generate")) == fast  # placed on the credit
    assert later.count(("scheduler", "Admit")) == 2 - fast  # the rest: the full path
    assert later.count(("scheduler", "Place")) == fast
    assert later.count(("predictor", "Predict")) == 2 - fast  # the full path's, at once
    assert fed_predictions == fast  # every request is still predicted: fast ones in batches
    if fast:
        first_place = later.index(("scheduler", "Place"))
        first_report = later.index(("scheduler", "Report"))
        assert first_place < first_report  # the scheduler hears of the placement first
        first_gen = later.index(("replica-1", "Generate"))
        assert ("predictor", "Batch") not in later[:first_gen]  # not before the stream
        for _, rid, _ in mesh.fed:  # a request's prediction is learned before its completion
            kinds = [k for k, r, _ in mesh.fed if r == rid]
            assert kinds in (["predict", "observe"], ["observe"])


class GoneReplicaMesh(LeasingMesh):
    """Credits on replica-1, whose process is gone (its streams fail UNAVAILABLE at once);
    scheduler.Admit places on replica-0. Records each Report's finish reason."""

    def __init__(self) -> None:
        super().__init__(credits=5)
        self.down = ("replica-1",)
        self.reports: list[tuple[str, str]] = []

    async def call(
        self, application: str, kind: str, method: str, message: Any, timeout_s: Any = None
    ) -> Any:
        if (kind, method) == ("scheduler", "Report"):
            self.reports.append((message.replica.application, message.finish_reason))
        return await super().call(application, kind, method, message, timeout_s)


def test_a_gone_replica_is_reported_and_the_request_admitted_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mesh = GoneReplicaMesh()
    app, _ = build_ingress(monkeypatch, mesh)
    with TestClient(app, raise_server_exceptions=False) as client:
        _stream(client)  # the full path; the grant (replica-1) is asked for
        _wait_for(mesh, ("scheduler", "Sync"), 1)
        _stream(client)  # on the credit: replica-1 fails, re-admitted to replica-0, served
        _wait_for(mesh, ("scheduler", "Report"), 3)
    assert ("replica-1", REPLICA_UNAVAILABLE) in mesh.reports  # the scheduler is told
    assert mesh.calls.count(("replica-1", "Generate")) == 1
    assert mesh.calls.count(("replica-0", "Generate")) == 2
