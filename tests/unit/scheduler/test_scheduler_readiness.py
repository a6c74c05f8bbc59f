"""The scheduler's readiness: a replica takes no work until it has answered a Status probe, a
request for a model with no ready replica is refused at once (no placement that would fail
mid-request), and Health lists the models that are ready."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from shared.rpc.client import CallFailed
from shared.rpc.slomesh.v1 import common_pb2, scheduler_pb2

LLAMA, MISTRAL = "llama-3.1-8b", "mistral-7b"
REPLICAS = {"replica-0": LLAMA, "replica-1": LLAMA, "replica-2": MISTRAL}


class StatusDouble:
    """The scheduler's mesh client for Status probes: the replicas in `up` answer, the others
    are not up yet (UNAVAILABLE, what a Serve handle call to a starting replica gives)."""

    def __init__(self, up: set[str]) -> None:
        self.up = up
        self.probes: list[str] = []
        self.probed = asyncio.Event()

    async def call(
        self, application: str, kind: str, method: str, message: Any, timeout_s: Any = None
    ) -> Any:
        assert (kind, method) == ("replica", "Status")
        self.probes.append(application)
        if len(self.probes) % len(REPLICAS) == 0:
            self.probed.set()
        if application not in self.up:
            raise CallFailed(application, "UNAVAILABLE", "starting")
        ref = common_pb2.ReplicaRef(application=application, gpu="A100-80GB")
        ref.model = REPLICAS[application]
        return common_pb2.ReplicaState(replica=ref)

    async def probe_round(self) -> None:
        self.probed.clear()
        await asyncio.wait_for(self.probed.wait(), 10)
        await asyncio.sleep(0)  # the reconciler records the round's answers


def _scheduler(up: set[str]) -> tuple[Any, StatusDouble]:
    from services.scheduler.deployment import SchedulerDeployment

    cls = SchedulerDeployment.func_or_class  # the class under Serve's decorator
    args = {
        "replicas": [
            {"application": a, "gpu": "A100-80GB", "model": m} for a, m in REPLICAS.items()
        ],
        "reconcile_interval_ms": 20,
        "tracing": {"exporter": "none"},
    }
    sched = cls(args)
    double = StatusDouble(up)
    sched.client = double  # before the reconciler's first probe (it starts on the next step)
    return sched, double


def _admit(model: str, rid: str) -> scheduler_pb2.AdmitRequest:
    meta = common_pb2.RequestMeta(
        request_id=rid,
        model=model,
        input_tokens=20,
        max_tokens=16,
        slo=common_pb2.Slo(ttft_slo_ms=60_000),
        arrival_unix_s=time.time(),
    )
    return scheduler_pb2.AdmitRequest(meta=meta)


def test_no_model_is_ready_before_any_replica_answers_and_requests_are_refused_at_once() -> None:
    async def run() -> None:
        sched, _ = _scheduler(up=set())
        health = await sched.Health(scheduler_pb2.HealthQuery())
        assert list(health.ready_models) == []
        assert not health.can_admit
        reply = await sched.Admit(_admit(LLAMA, "early"))
        assert not reply.admitted
        assert reply.retry_after_s == 0  # the ingress answers 503 with Retry-After 1 s
        assert LLAMA in reply.reason

    asyncio.run(run())


def test_a_model_is_ready_once_a_replica_answers_and_only_answered_replicas_take_work() -> None:
    async def run() -> None:
        sched, double = _scheduler(up={"replica-1"})
        await double.probe_round()
        health = await sched.Health(scheduler_pb2.HealthQuery())
        assert list(health.ready_models) == [LLAMA]
        placed = [(await sched.Admit(_admit(LLAMA, f"r{k}"))).replica.application for k in range(3)]
        assert placed == ["replica-1"] * 3  # replica-0 has not answered: nothing goes there
        refused = await sched.Admit(_admit(MISTRAL, "m0"))
        assert not refused.admitted and MISTRAL in refused.reason
        double.up |= {"replica-0", "replica-2"}
        await double.probe_round()
        health = await sched.Health(scheduler_pb2.HealthQuery())
        assert list(health.ready_models) == sorted([LLAMA, MISTRAL])
        assert (await sched.Admit(_admit(MISTRAL, "m1"))).replica.application == "replica-2"

    asyncio.run(run())


def test_a_replica_that_stops_answering_leaves_the_ready_models() -> None:
    async def run() -> None:
        sched, double = _scheduler(up={"replica-2"})
        await double.probe_round()
        assert sched.ready_models() == [MISTRAL]
        double.up.clear()
        for _ in range(sched.args.failures_to_unhealthy):
            await double.probe_round()
        assert sched.ready_models() == []

    asyncio.run(run())
