"""The ingress's reject gate (core/reject_gate.py): after the scheduler says the queue cannot take
a request of some key, requests of that key are answered 429 at once for a moment, without a
predictor or scheduler call; an admission or the end of the hold-off asks the scheduler again."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import FakeMesh, build_ingress
from fastapi.testclient import TestClient

from services.ingress.core.reject_gate import GateKey, RejectGate
from shared.rpc.slomesh.v1 import scheduler_pb2

KEY = GateKey("llama", 20_000, 0)


@pytest.mark.parametrize(
    ("admitted", "drop_reason", "retry_after_s", "ask_at_s", "held"),
    [
        ("no", "deadline-infeasible", 1.0, 0.1, True),  # queue too long: held
        ("no", "queue-full", 1.0, 0.1, True),
        ("no", "replicas-full", 1.0, 0.1, False),  # one finished request lifts it
        ("no", "sheddable-saturated", 1.0, 0.1, True),
        ("no", "deadline-infeasible", 1.0, 0.6, False),  # hold-off (0.5 s) over
        ("no", "deadline-infeasible", 0.2, 0.3, False),  # capped by Retry-After
        ("no", "unavailable", 1.0, 0.1, False),  # a replica problem, not the queue
        ("no", "rate-limited", 1.0, 0.1, False),
        ("no", "deadline-infeasible", 0.0, 0.1, False),  # no Retry-After: not a queue verdict
        ("yes", "", 0.0, 0.1, False),
    ],
)
def test_gate_holds_only_queue_wide_rejections(
    admitted: str, drop_reason: str, retry_after_s: float, ask_at_s: float, held: bool
) -> None:
    gate = RejectGate(hold_off_s=0.5)
    gate.observe(KEY, admitted == "yes", drop_reason, retry_after_s, "queue long", now_s=0.0)
    answer = gate.check(KEY, now_s=ask_at_s)
    assert (answer is not None) == held
    if answer is not None:
        assert answer.drop_reason == drop_reason and answer.retry_after_s == retry_after_s


@pytest.mark.parametrize(
    "other",
    [GateKey("qwen", 20_000, 0), GateKey("llama", 60_000, 0), GateKey("llama", 20_000, 1)],
)
def test_gate_holds_only_its_own_key(other: GateKey) -> None:
    gate = RejectGate(hold_off_s=0.5)
    gate.observe(KEY, False, "deadline-infeasible", 1.0, "queue long", now_s=0.0)
    assert gate.check(other, now_s=0.1) is None
    assert gate.check(KEY, now_s=0.1) is not None


def test_an_admission_opens_the_gate_and_zero_hold_off_disables_it() -> None:
    gate = RejectGate(hold_off_s=0.5)
    gate.observe(KEY, False, "deadline-infeasible", 1.0, "queue long", now_s=0.0)
    gate.observe(KEY, True, "", 0.0, "", now_s=0.1)
    assert gate.check(KEY, now_s=0.2) is None
    off = RejectGate(hold_off_s=0.0)
    off.observe(KEY, False, "deadline-infeasible", 1.0, "queue long", now_s=0.0)
    assert off.check(KEY, now_s=0.1) is None


def test_gate_memory_is_bounded_whatever_the_keys() -> None:
    gate = RejectGate(hold_off_s=0.5, max_keys=8)
    for ttft_ms in range(1000):  # custom objectives: a new key per request
        gate.observe(GateKey("llama", ttft_ms, 0), False, "deadline-infeasible", 1.0, "", 0.0)
    assert len(gate) == 8
    # the newest keys are kept, still closed
    assert gate.check(GateKey("llama", 999, 0), now_s=0.1) is not None
    assert gate.check(GateKey("llama", 0, 0), now_s=0.1) is None


class InfeasibleMesh(FakeMesh):
    """The scheduler rejects every request as deadline-infeasible (its queue too long)."""

    async def call(
        self, application: str, kind: str, method: str, message: Any, timeout_s: Any = None
    ) -> Any:
        if (kind, method) != ("scheduler", "Admit"):
            return await super().call(application, kind, method, message, timeout_s)
        self.calls.append((application, method))
        return scheduler_pb2.AdmitReply(
            admitted=False,
            reason="overloaded: 80 requests queued ahead drain in ~6.0 s",
            retry_after_s=60.0,
            drop_reason="deadline-infeasible",
        )


def _chat(cls: str) -> dict[str, Any]:
    return {"model": "llama", "messages": [{"role": "user", "content": "hi"}], "slo": cls}


def test_ingress_answers_held_requests_without_calling_predictor_or_scheduler(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mesh = InfeasibleMesh()
    app, instance = build_ingress(monkeypatch, mesh, reject_hold_off_s=600.0)
    with TestClient(app, raise_server_exceptions=False) as client:
        first = client.post("/v1/chat/completions", json=_chat("interactive"))
        calls_after_first = list(mesh.calls)
        held = [client.post("/v1/chat/completions", json=_chat("interactive")) for _ in range(3)]
        other_class = client.post("/v1/chat/completions", json=_chat("batch-1"))
    assert (
        first.status_code == 429 and first.headers["x-slomesh-drop-reason"] == "deadline-infeasible"
    )
    assert calls_after_first == [("predictor", "Predict"), ("scheduler", "Admit")]
    for r in held:
        assert r.status_code == 429
        assert r.headers["retry-after"] == "60"
        assert r.headers["x-slomesh-drop-reason"] == "deadline-infeasible"
        assert r.json()["error"]["type"] == "rate_limit_exceeded"
        assert "held at the ingress" in r.json()["error"]["message"]
    # the held requests made no call; another SLO class still asks the scheduler
    assert mesh.calls[len(calls_after_first) :] == [
        ("predictor", "Predict"),
        ("scheduler", "Admit"),
    ]
    assert other_class.status_code == 429
    assert instance.pipeline.gate.held == 3
