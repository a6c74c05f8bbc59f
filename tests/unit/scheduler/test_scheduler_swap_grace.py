"""A replica with a swap due is swapping, not lost: its missed Status probes are excused for the
grace factor times the profile's swap time (core/replica_health.py), then the usual rule holds."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import pytest

from services.scheduler.args import SchedulerArgs
from services.scheduler.core.admission import AdmissionCore
from services.scheduler.core.live_view import LiveReplica
from services.scheduler.core.policies import create_global_policy
from services.scheduler.core.replica_health import probe_verdict
from shared.domain import SLO, Request
from shared.rpc.client import CallFailed
from shared.rpc.slomesh.v1 import common_pb2
from tests.unit.scheduler.conftest import make_profile

LLAMA, MISTRAL = "llama-3.1-8b", "mistral-7b"
SWAP_S = 6.0
"""The swap models' profiled load time: 6e9 weight bytes at the fake profile's 1e9 B/s."""


def req(rid: str, model: str, ttft_s: float = 60.0) -> Request:
    return Request(rid, model, 10, 20, 0.0, SLO(ttft_s))


def replica(name: str = "replica-0") -> LiveReplica:
    profile = dataclasses.replace(make_profile("B"), weight_bytes=int(SWAP_S * 10**9))
    return LiveReplica(name, "gpu", "A", make_profile("A"), swap_profiles={"B": profile})


@pytest.mark.parametrize(
    ("misses", "missed_for_s", "swap_s", "factor", "unhealthy"),
    [
        (1, 0.0, 0.0, 2.5, False),  # one slow answer: never
        (2, 1.0, 0.0, 2.5, True),  # no swap due: the failures in a row decide
        (2, 1.0, 6.0, 2.5, False),  # swapping: excused
        (14, 14.9, 6.0, 2.5, False),  # still inside 2.5 x 6 s
        (15, 15.0, 6.0, 2.5, True),  # the grace is over
        (2, 1.0, 6.0, 0.0, True),  # factor 0: a swap excuses nothing
        (1, 30.0, 6.0, 2.5, False),  # past the grace, yet fewer misses than the rule needs
    ],
)
def test_probe_verdict(
    misses: int, missed_for_s: float, swap_s: float, factor: float, unhealthy: bool
) -> None:
    assert probe_verdict(misses, missed_for_s, 2, swap_s, factor) is unhealthy


def _order_b(rep: LiveReplica) -> None:
    rep.book_swap("B")


def _place_b(rep: LiveReplica) -> None:
    rep.book(req("b1", "B"), 0.0)


def _swapped(rep: LiveReplica) -> None:
    rep.book_swap("B")
    rep.observe_active("B")  # Status named B active: the order is carried out


def _loading_b(rep: LiveReplica) -> None:
    rep.book_swap("B")
    rep.observe_active("B", swapping=True)  # Status: the swap to B runs


def _cancelled(rep: LiveReplica) -> None:
    rep.book_swap("B")
    rep.book_swap("A")  # an order back to the active model cancels it


def _nothing(rep: LiveReplica) -> None:
    pass


@pytest.mark.parametrize(
    ("setup", "swap_to", "probes", "grace", "healthy_after"),
    [
        # (what the books hold, the swap due, missed-probe times, grace factor, healthy after)
        (_nothing, "", [1.0, 2.0], 2.5, False),  # no swap due: lost after two misses
        (_order_b, "B", [1.0, 2.0], 2.5, True),  # the scheduler ordered a swap: swapping
        (_place_b, "B", [1.0, 2.0], 2.5, True),  # a request waits for B: it swaps on its own
        (_order_b, "B", [1.0, 2.0, 15.9], 2.5, True),  # 14.9 s since the first miss < 15 s
        (_order_b, "B", [1.0, 2.0, 16.0], 2.5, False),  # 15 s: lost
        (_order_b, "B", [1.0, 2.0], 0.0, False),  # factor 0: no grace
        (_loading_b, "B", [1.0, 2.0], 2.5, True),  # Status said the swap to B runs: excused
        (_swapped, "", [1.0, 2.0], 2.5, False),  # swap carried out: no longer excused
        (_cancelled, "", [1.0, 2.0], 2.5, False),  # order cancelled: nothing due
    ],
)
def test_missed_probes_of_a_swapping_replica(
    setup: Callable[[LiveReplica], None],
    swap_to: str,
    probes: list[float],
    grace: float,
    healthy_after: bool,
) -> None:
    rep = replica()
    core = AdmissionCore([rep], create_global_policy("round-robin"), "round-robin", 4)
    core.set_health("replica-0", True, 0.0)
    setup(rep)
    assert rep.swap_due() == swap_to
    for t in probes:
        core.record_probe("replica-0", False, t, 2, grace)
    assert rep.healthy is healthy_after


def test_an_answer_between_misses_starts_the_grace_again() -> None:
    rep = replica()
    core = AdmissionCore([rep], create_global_policy("round-robin"), "round-robin", 4)
    core.set_health("replica-0", True, 0.0)
    rep.book_swap("B")
    for t, answered in [(1.0, False), (10.0, True), (11.0, False), (25.0, False)]:
        core.record_probe("replica-0", answered, t, 2, 2.5)
    assert rep.healthy  # 14 s since the first miss of this spell
    core.record_probe("replica-0", False, 26.0, 2, 2.5)
    assert not rep.healthy


def test_a_replica_found_gone_is_lost_at_once_even_while_swapping() -> None:
    rep = replica()
    core = AdmissionCore([rep], create_global_policy("round-robin"), "round-robin", 4)
    core.set_health("replica-0", True, 0.0)
    rep.book_swap("B")
    core.record_probe("replica-0", False, 1.0, 1)  # an ingress's stream was refused
    assert not rep.healthy


def test_qlm_keeps_a_swapping_replicas_work_until_the_grace_is_over() -> None:
    """Before, two missed probes during a swap made the replica lost: QLM placed what it held
    again on the other replica, copies nobody sends (the ingress streams the first placement)."""
    reps = [replica(f"replica-{k}") for k in range(2)]
    core = AdmissionCore(reps, create_global_policy("qlm"), "qlm", 64)
    for rep in reps:
        core.set_health(rep.application, True, 0.0)
    for k in range(4):
        core.admit(req(f"r{k}", "A"), 0.0)
    placed = set(reps[0].in_flight)
    assert placed and not reps[1].in_flight
    reps[0].book_swap("B")
    for t in (1.0, 2.0, 3.0):
        core.record_probe("replica-0", False, t, 2, 2.5)
    assert reps[0].healthy and core.excused_misses == 2
    assert set(reps[0].in_flight) == placed and not reps[1].in_flight
    core.record_probe("replica-0", False, 1.0 + 2.5 * SWAP_S, 2, 2.5)
    assert not reps[0].healthy
    assert set(reps[1].in_flight) == placed  # lost after all: re-planned on the other one


def test_scheduler_args_default_swap_grace() -> None:
    replicas = [{"application": "replica-0", "gpu": "A100-80GB", "model": "llama-3.1-8b"}]
    assert SchedulerArgs.model_validate({"replicas": replicas}).swap_grace_factor == 2.5
    with pytest.raises(ValueError, match="swap_grace_factor"):
        SchedulerArgs.model_validate({"replicas": replicas, "swap_grace_factor": -1})


class SwappingStatus:
    """The scheduler's mesh client for Status probes: replica-0 answers until `answering` is
    False, then its probes time out (its event loop is busy restarting the engine)."""

    def __init__(self) -> None:
        self.answering = True

    async def call(
        self, application: str, kind: str, method: str, message: Any, timeout_s: Any = None
    ) -> Any:
        if not self.answering:
            raise CallFailed(application, "DEADLINE_EXCEEDED", "Status timed out")
        ref = common_pb2.ReplicaRef(application=application, gpu="A100-80GB", model=LLAMA)
        return common_pb2.ReplicaState(replica=ref, active_model=LLAMA)


@pytest.mark.parametrize(
    ("grace", "healthy_after", "told"),
    [
        (2.5, True, "replica.swap_grace replica=replica-0 swap_to=mistral-7b"),
        (0.0, False, "replica.health replica=replica-0 healthy=False"),
    ],
)
def test_the_scheduler_shell_probes_with_the_swap_grace(
    grace: float, healthy_after: bool, told: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def run() -> None:
        from services.scheduler.deployment import SchedulerDeployment

        cls: Any = SchedulerDeployment.func_or_class  # type: ignore[attr-defined]
        replica_args = {"application": "replica-0", "gpu": "A100-80GB", "model": LLAMA}
        sched = cls(
            {
                "replicas": [{**replica_args, "swap_models": [MISTRAL]}],
                "reconcile_interval_ms": 3_600_000,  # the test probes by hand
                "swap_grace_factor": grace,
                "tracing": {"exporter": "none"},
            }
        )
        double = sched.client = SwappingStatus()
        await sched._probe(["replica-0"])
        rep = sched.core.replicas["replica-0"]
        assert rep.healthy and rep.expected_swap_s() == 0.0
        rep.book_swap(MISTRAL)  # the profile's A100 load time for it: seconds
        double.answering = False
        for _ in range(sched.args.failures_to_unhealthy):
            await sched._probe(["replica-0"])
        assert rep.healthy is healthy_after
        assert sched.core.excused_misses == (1 if healthy_after else 0)

    with caplog.at_level(logging.WARNING, logger="slomesh.scheduler"):
        asyncio.run(run())
    assert told in caplog.text  # the run's log tells every health change and excused miss
