"""Scheduler shards in one event loop (services/scheduler/shard_peers.py, shard_member.py):
they divide the replicas, tell ingresses about it in Health, take over a dead peer's replicas
and hand them back when it returns, learn of a shard added later, and pass tenant usage so
each shard's counters include what the others charged."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from shared.rpc.client import CallFailed
from shared.rpc.slomesh.v1 import common_pb2, scheduler_pb2

LLAMA = "llama-3.1-8b"
REPLICAS = [f"replica-{i}" for i in range(4)]


class Mesh:
    """The shards' mesh client: scheduler calls go to the shard objects (a shard in `dead`, or
    not started, fails UNAVAILABLE, as a dead Serve replica's handle does), Status probes are
    answered for every replica."""

    def __init__(self) -> None:
        self.shards: dict[str, Any] = {}
        self.dead: set[str] = set()
        self.deleted: set[str] = set()
        """Shards whose application is gone: a handle call raises, not CallFailed."""

    async def call(
        self, application: str, kind: str, method: str, message: Any, timeout_s: Any = None
    ) -> Any:
        if kind == "scheduler":
            if application in self.deleted:
                raise RuntimeError(f"Application '{application}' does not exist")
            if application in self.dead or application not in self.shards:
                raise CallFailed(application, "UNAVAILABLE", "gone")
            return await getattr(self.shards[application], method)(message)
        assert (kind, method) == ("replica", "Status")
        ref = common_pb2.ReplicaRef(application=application, gpu="A100-80GB", model=LLAMA)
        return common_pb2.ReplicaState(replica=ref)

    def start(self, name: str, peers: list[str]) -> Any:
        from services.scheduler.deployment import SchedulerDeployment

        args = {
            "replicas": [{"application": a, "gpu": "A100-80GB", "model": LLAMA} for a in REPLICAS],
            "reconcile_interval_ms": 20,
            "tracing": {"exporter": "none"},
            "shard": {"name": name, "peers": peers, "exchange_interval_ms": 20},
        }
        shard = SchedulerDeployment.func_or_class(args)
        shard.client = self
        shard.shards.client = self
        self.shards[name] = shard
        return shard


async def _until(done: Callable[[], bool]) -> None:
    """Wait (a bounded number of event-loop rounds) until `done`; the caller asserts it."""
    for _ in range(500):
        if done():
            return
        await asyncio.sleep(0.01)


def _admit(rid: str) -> scheduler_pb2.AdmitRequest:
    meta = common_pb2.RequestMeta(
        request_id=rid,
        model=LLAMA,
        input_tokens=20,
        max_tokens=16,
        slo=common_pb2.Slo(ttft_slo_ms=60_000),
        arrival_unix_s=time.time(),
    )
    return scheduler_pb2.AdmitRequest(meta=meta)


def _ready(health: scheduler_pb2.HealthReply) -> dict[str, int]:
    return {r.model: r.ready for r in health.replicas}


def test_two_shards_divide_the_replicas_and_say_so_in_health() -> None:
    async def run() -> None:
        mesh = Mesh()
        a = mesh.start("scheduler", ["scheduler-1"])
        b = mesh.start("scheduler-1", ["scheduler"])
        assert a.shards.owned | b.shards.owned == set(REPLICAS)
        assert not a.shards.owned & b.shards.owned
        await _until(lambda: len(a.ready_models()) == len(b.ready_models()) == 1)
        health = await a.Health(scheduler_pb2.HealthQuery())
        assert health.shard == "scheduler"
        assert list(health.shards) == ["scheduler", "scheduler-1"]
        assert _ready(health) == {LLAMA: 2}
        placed = {(await b.Admit(_admit(f"r{k}"))).replica.application for k in range(6)}
        assert placed <= b.shards.owned
        counted = await b.Health(scheduler_pb2.HealthQuery())
        assert (counted.admitted_total, counted.fast_path_total) == (6, 0)  # all by Admit
        counts = await b.AdmissionCounts()
        assert (counts["admit"], counts["fast_path"], counts["refused"]) == (6, 0, 0)
        assert set(counts["by_replica"]) == placed and sum(counts["by_replica"].values()) == 6

    asyncio.run(run())


def test_a_dead_shards_replicas_are_taken_over_and_handed_back() -> None:
    async def run() -> None:
        mesh = Mesh()
        a = mesh.start("scheduler", ["scheduler-1"])
        b = mesh.start("scheduler-1", ["scheduler"])
        theirs = set(b.shards.owned)
        await _until(lambda: len(a.ready_models()) == 1)
        mesh.dead.add("scheduler-1")
        await _until(lambda: a.shards.owned == set(REPLICAS))
        assert a.shards.owned == set(REPLICAS)
        await _until(lambda: _ready_count(a) == 4)
        assert all(a.core.replicas[r].healthy for r in theirs)  # they take work from it
        assert _ready(await a.Health(scheduler_pb2.HealthQuery())) == {LLAMA: 4}
        mesh.dead.clear()
        await _until(lambda: a.shards.owned.isdisjoint(theirs))
        assert a.shards.owned == set(REPLICAS) - theirs
        assert all(not a.core.replicas[r].healthy for r in theirs)

    asyncio.run(run())


def _ready_count(shard: Any) -> int:
    return sum(r.healthy for r in shard.core.replicas.values())


def test_a_shard_added_later_is_learned_and_given_its_share() -> None:
    async def run() -> None:
        mesh = Mesh()
        a = mesh.start("scheduler", ["scheduler-1"])
        b = mesh.start("scheduler-1", ["scheduler"])
        await _until(lambda: len(a.ready_models()) == 1)
        c = mesh.start("scheduler-2", ["scheduler"])  # knows only the first
        await _until(
            lambda: "scheduler-2" in b.shards.live() and c.shards.live() == a.shards.live()
        )
        assert b.shards.live() == ["scheduler", "scheduler-1", "scheduler-2"]
        assert c.shards.live() == b.shards.live()
        owners = [a.shards.owned, b.shards.owned, c.shards.owned]
        assert set().union(*owners) == set(REPLICAS)
        assert sum(len(o) for o in owners) == len(REPLICAS)
        assert c.shards.owned

    asyncio.run(run())


def test_each_shards_counters_include_its_peers_charges() -> None:
    async def run() -> None:
        mesh = Mesh()
        a = mesh.start("scheduler", ["scheduler-1"])
        b = mesh.start("scheduler-1", ["scheduler"])
        vtc_a, vtc_b = a.core.policy.selector.vtc, b.core.policy.selector.vtc
        for vtc in (vtc_a, vtc_b):
            vtc.enqueued("t")
        await _until(lambda: a.shards.exchanges > 1 and b.shards.exchanges > 1)
        before = vtc_b.counters["t"]
        vtc_a.charge_dispatch("x", "t", 100, 50.0)
        await _until(lambda: vtc_b.counters["t"] > before)
        assert vtc_b.counters["t"] == before + 150.0
        assert vtc_b.charged.get("t", 0.0) == 0.0  # not charged there: only absorbed
        health = await b.Health(scheduler_pb2.HealthQuery())
        assert 0.0 < health.max_usage_staleness_s < 60.0  # measured, and said in Health
        assert health.usage_staleness_s <= health.max_usage_staleness_s

    asyncio.run(run())


def test_a_deleted_shard_is_down_and_the_exchanges_go_on() -> None:
    async def run() -> None:
        mesh = Mesh()
        a = mesh.start("scheduler", ["scheduler-1"])
        mesh.start("scheduler-1", ["scheduler"])
        await _until(lambda: len(a.ready_models()) == 1)
        mesh.deleted.add("scheduler-1")
        await _until(lambda: a.shards.live() == ["scheduler"])
        assert a.shards.live() == ["scheduler"]
        assert a.shards.owned == set(REPLICAS)
        rounds = a.shards.exchanges
        await _until(lambda: a.shards.exchanges > rounds + 2)
        assert a.shards.exchanges > rounds + 2  # the exchange loop survived the error

    asyncio.run(run())


def test_a_lone_scheduler_forgets_a_shard_that_joined_it_and_was_deleted() -> None:
    async def run() -> None:
        mesh = Mesh()
        a = mesh.start("scheduler", [])  # the default mesh: one scheduler, no peers
        await _until(lambda: len(a.ready_models()) == 1)
        mesh.start("scheduler-1", ["scheduler"])  # `slomesh shard add`: it calls the first
        await _until(lambda: a.shards.live() == ["scheduler", "scheduler-1"])
        assert a.shards.live() == ["scheduler", "scheduler-1"]
        mesh.deleted.add("scheduler-1")  # `slomesh shard remove`
        await _until(lambda: a.shards.live() == ["scheduler"])
        assert a.shards.live() == ["scheduler"]
        assert a.shards.owned == set(REPLICAS)

    asyncio.run(run())


def test_replicas_handed_back_keep_the_requests_they_run_for_the_shard() -> None:
    async def run() -> None:
        mesh = Mesh()
        a = mesh.start("scheduler", ["scheduler-1"])
        b = mesh.start("scheduler-1", ["scheduler"])
        theirs = set(b.shards.owned)
        await _until(lambda: _ready_count(a) == 2)
        mesh.dead.add("scheduler-1")  # its process is gone: nothing of it runs
        for task in (b.shards._task, b._reconciler):
            assert task is not None
            task.cancel()
        await _until(lambda: _ready_count(a) == 4)
        for r in set(REPLICAS) - theirs:  # until its next probe: work goes to those taken over
            a.core.set_health(r, False, time.time())
        placed = {}
        for k in range(8):
            placed[f"r{k}"] = (await a.Admit(_admit(f"r{k}"))).replica.application
        running = {rid for rid, app in placed.items() if app in theirs}
        assert running  # a runs some on the replicas it took over
        mesh.dead.clear()
        mesh.start("scheduler-1", ["scheduler"])  # Serve restarted it: a hands them back
        await _until(lambda: a.shards.owned.isdisjoint(theirs))
        await _until(lambda: all(a.core.replicas[r].healthy for r in a.shards.owned))  # probed
        assert (await a.Admit(_admit("after"))).admitted
        books = {app: set(a.core.replicas[app].in_flight) for app in REPLICAS}
        assert set().union(*(books[r] for r in theirs)) == running  # they run on there
        own = set().union(*(books[r] for r in a.shards.owned))
        assert own == set(placed) - running | {"after"}  # and take no seat of a's own

    asyncio.run(run())
