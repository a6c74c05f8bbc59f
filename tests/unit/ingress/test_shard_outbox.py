"""The ingress's batched calls to a scheduler shard (shard_outbox.py): placements and reports
go in one `Sync` call in their order, at once when a grant is needed or the batch is full,
one call at a time; a failed call's placements are handed back; `drained` waits for what was
queued before it."""

from __future__ import annotations

import asyncio

from services.ingress.shard_outbox import OutboxConfig, ShardOutbox
from shared.rpc.client import CallFailed
from shared.rpc.slomesh.v1 import common_pb2, scheduler_pb2


def _notice(rid: str) -> scheduler_pb2.PlaceNotice:
    meta = common_pb2.RequestMeta(request_id=rid, model="m")
    return scheduler_pb2.PlaceNotice(ingress_id="i", admit=scheduler_pb2.AdmitRequest(meta=meta))


def _report(rid: str) -> scheduler_pb2.CompletionReport:
    return scheduler_pb2.CompletionReport(meta=common_pb2.RequestMeta(request_id=rid))


class Scheduler:
    """Records each Sync's items as (kind, request id); `gate` holds calls until set."""

    def __init__(self, fail: bool = False) -> None:
        self.batches: list[list[tuple[str, str]]] = []
        self.fail = fail
        self.gate = asyncio.Event()
        self.gate.set()

    async def sync(self, batch: scheduler_pb2.SyncBatch) -> scheduler_pb2.LeaseGrant:
        await self.gate.wait()
        items = []
        for item in batch.items:
            work = str(item.WhichOneof("work"))
            meta = item.place.admit.meta if work == "place" else item.report.meta
            items.append((work, meta.request_id))
        self.batches.append(items)
        if self.fail:
            raise CallFailed("scheduler", "UNAVAILABLE", "down")
        return scheduler_pb2.LeaseGrant(epoch=f"g{len(self.batches)}")


def _outbox(sched: Scheduler, config: OutboxConfig) -> tuple[ShardOutbox, list[str], list[str]]:
    grants: list[str] = []
    failed: list[str] = []
    box = ShardOutbox(
        sched.sync,
        "i",
        lambda g: grants.append(g.epoch),
        lambda ns: failed.extend(n.admit.meta.request_id for n in ns),
        config,
    )
    return box, grants, failed


def test_items_of_one_interval_share_one_call_in_their_order() -> None:
    async def run() -> None:
        sched = Scheduler()
        box, grants, _ = _outbox(sched, OutboxConfig(interval_ms=50))
        box.place(_notice("a"), {})
        box.place(_notice("b"), {})
        box.report(_report("a"))
        await box.drained()
        assert sched.batches == [[("place", "a"), ("place", "b"), ("report", "a")]]
        assert grants == ["g1"]
        assert box.calls == 1

    asyncio.run(run())


def test_a_full_batch_goes_at_once_and_one_call_is_in_flight_at_a_time() -> None:
    async def run() -> None:
        sched = Scheduler()
        sched.gate.clear()
        box, _, _ = _outbox(sched, OutboxConfig(interval_ms=60_000, max_items=2))
        for rid in "abc":
            box.place(_notice(rid), {})
        for _ in range(10):
            await asyncio.sleep(0)
        assert sched.batches == []  # the first batch is held by the scheduler
        box.report(_report("a"))  # fills the second batch: it goes once the first is answered
        sched.gate.set()
        await box.drained()
        assert sched.batches == [
            [("place", "a"), ("place", "b")],
            [("place", "c"), ("report", "a")],
        ]

    asyncio.run(run())


def test_flush_asks_for_a_grant_without_waiting_for_the_interval() -> None:
    async def run() -> None:
        sched = Scheduler()
        box, grants, _ = _outbox(sched, OutboxConfig(interval_ms=60_000))
        box.flush()  # nothing waits: an empty Sync is a grant request
        for _ in range(10):
            await asyncio.sleep(0)
        assert sched.batches == [[]]
        assert grants == ["g1"]
        box.place(_notice("a"), {})
        box.flush()  # credits spent: what waits goes now
        for _ in range(10):
            await asyncio.sleep(0)
        assert sched.batches == [[], [("place", "a")]]

    asyncio.run(run())


def test_a_failed_calls_placements_are_handed_back_and_its_reports_dropped() -> None:
    async def run() -> None:
        sched = Scheduler(fail=True)
        box, grants, failed = _outbox(sched, OutboxConfig(interval_ms=0))
        box.place(_notice("a"), {})
        box.report(_report("b"))
        await box.drained()
        assert failed == ["a"]
        assert grants == []

    asyncio.run(run())


def test_beyond_the_queue_bound_a_placement_is_handed_back_at_once() -> None:
    async def run() -> None:
        sched = Scheduler()
        sched.gate.clear()
        box, _, failed = _outbox(sched, OutboxConfig(interval_ms=0, max_queued_items=1))
        box.place(_notice("a"), {})
        for _ in range(10):
            await asyncio.sleep(0)  # "a" goes and is held in flight
        box.place(_notice("b"), {})
        box.place(_notice("c"), {})  # the queue holds "b": dropped
        assert failed == ["c"]
        assert box.dropped == 1
        sched.gate.set()
        await box.drained()
        assert sched.batches == [[("place", "a")], [("place", "b")]]

    asyncio.run(run())


def test_the_wait_is_longer_while_this_ingress_holds_credits() -> None:
    async def run() -> None:
        holds = [False]
        config = OutboxConfig(interval_ms=20, headroom_interval_ms=100)
        box = ShardOutbox(Scheduler().sync, "i", print, print, config, lambda: holds[0])
        assert box.wait_s() == 0.02  # no credit: the shard may have a queue waiting on reports
        holds[0] = True
        assert box.wait_s() == 0.1

    asyncio.run(run())


def test_with_credits_held_a_grant_needed_still_goes_at_once() -> None:
    async def run() -> None:
        sched = Scheduler()
        config = OutboxConfig(interval_ms=3_600_000, headroom_interval_ms=3_600_000)
        box = ShardOutbox(sched.sync, "i", lambda g: None, print, config, lambda: True)
        box.report(_report("r1"))
        await asyncio.sleep(0)
        assert sched.batches == []  # waits (an hour here)
        box.flush()
        await box.drained()
        assert sched.batches == [[("report", "r1")]]

    asyncio.run(run())
