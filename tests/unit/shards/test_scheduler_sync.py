"""The scheduler's `Sync` (services/scheduler/leasing.py): an ingress's placements on credits
and completion reports run in their order in one call, answered with its new grant; a placement
whose metadata breaks a domain rule is skipped, not the batch."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from shared.rpc.slomesh.v1 import common_pb2, scheduler_pb2

LLAMA = "llama-3.1-8b"
REPLICAS = ["replica-0", "replica-1"]


class Replicas:
    """Answers every replica's Status probe."""

    async def call(
        self, application: str, kind: str, method: str, message: Any, timeout_s: Any = None
    ) -> Any:
        ref = common_pb2.ReplicaRef(application=application, gpu="A100-80GB", model=LLAMA)
        return common_pb2.ReplicaState(replica=ref)


def _meta(rid: str, ttft_ms: int = 60_000) -> common_pb2.RequestMeta:
    return common_pb2.RequestMeta(
        request_id=rid,
        model=LLAMA,
        input_tokens=20,
        max_tokens=16,
        slo=common_pb2.Slo(ttft_slo_ms=ttft_ms),
        arrival_unix_s=time.time(),
    )


def _place(rid: str, app: str, ttft_ms: int = 60_000) -> scheduler_pb2.SyncItem:
    ref = common_pb2.ReplicaRef(application=app, gpu="A100-80GB", model=LLAMA)
    notice = scheduler_pb2.PlaceNotice(
        ingress_id="ing", admit=scheduler_pb2.AdmitRequest(meta=_meta(rid, ttft_ms)), replica=ref
    )
    return scheduler_pb2.SyncItem(place=notice)


def _report(rid: str, app: str) -> scheduler_pb2.SyncItem:
    ref = common_pb2.ReplicaRef(application=app, gpu="A100-80GB", model=LLAMA)
    report = scheduler_pb2.CompletionReport(
        meta=_meta(rid), replica=ref, output_tokens=4, finish_reason="stop"
    )
    return scheduler_pb2.SyncItem(report=report)


def test_placements_and_reports_run_in_order_and_the_answer_is_a_grant() -> None:
    async def run() -> None:
        from services.scheduler.deployment import SchedulerDeployment

        args = {
            "replicas": [{"application": a, "gpu": "A100-80GB", "model": LLAMA} for a in REPLICAS],
            "reconcile_interval_ms": 20,
            "tracing": {"exporter": "none"},
        }
        sched = SchedulerDeployment.func_or_class(args)
        sched.client = Replicas()
        for _ in range(100):
            if sched.ready_models():
                break
            await asyncio.sleep(0.01)
        assert sched.ready_models() == [LLAMA]
        items = [
            _place("a", "replica-0"),
            _place("b", "replica-0"),
            _place("bad", "replica-1", ttft_ms=0),  # no TTFT objective: skipped
            _report("a", "replica-0"),
        ]
        grant = await sched.Sync(scheduler_pb2.SyncBatch(ingress_id="ing", items=items))
        assert set(sched.core.replicas["replica-0"].in_flight) == {"b"}
        assert not sched.core.replicas["replica-1"].in_flight
        assert sched.counts.fast_path == 2  # the scheduler's admission counters
        assert await sched.AdmissionCounts() == {
            "fast_path": 2,
            "admit": 0,
            "queued": 0,
            "refused": 0,
            "sync_calls": 1,  # the call carrying the two placements (and the skipped one)
            "by_replica": {"replica-0": 2},
        }
        limits = {c.replica.application: c.limit for c in grant.credits}
        assert set(limits) == set(REPLICAS)
        assert limits["replica-0"] > 2  # two noticed, more credit on top
        empty = await sched.Sync(scheduler_pb2.SyncBatch(ingress_id="ing"))
        assert {c.replica.application: c.limit for c in empty.credits} == limits

    asyncio.run(run())
