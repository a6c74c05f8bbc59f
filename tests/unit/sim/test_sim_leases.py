"""The ingress's lease fast path in the simulator (slomesh/sim/leases.py): the live ledger and
lease book, the outbox's timing, and a report never reaching the books before its placement."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from services.ingress.core.credits import Credit
from services.ingress.core.delivered import DeliveredGuardConfig
from shared.domain import SLO, Request
from slomesh.sim.ingress import SimIngressConfig
from slomesh.sim.leases import SimLeaseConfig, SimLeases
from slomesh.sim.live_view import LiveViewConfig
from slomesh.sim.simulator import Simulator
from slomesh.stacks import STACKS
from tests.unit.sim.tiny_cpu import tiny_cpu_cluster

NO_GUARD = DeliveredGuardConfig(enabled=False)


class _Host:
    """A scheduler granting `limit` credits on replica "a" and recording notices."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.noticed: list[tuple[str, str, float]] = []
        self.grants: list[float] = []

    def notice(self, ingress: str, request: Request, application: str, now_s: float) -> None:
        self.noticed.append((request.request_id, application, now_s))

    def grant(self, ingress: str, now_s: float) -> tuple[list[Credit], float]:
        self.grants.append(now_s)
        return [Credit("a", "m", "", self.limit + len(self.noticed))], 0.5


def _run(timers: list[tuple[float, Callable[[float], None]]], until_s: float) -> None:
    """Fire the timers due by `until_s`, in time order (as the simulator's heap does)."""
    while True:
        due = sorted((t for t in timers if t[0] <= until_s), key=lambda t: t[0])
        if not due:
            return
        timers.remove(due[0])
        due[0][1](due[0][0])


def _req(rid: str) -> Request:
    return Request(rid, "m", 10, 10, 0.0, SLO(2.0, None))


def test_credits_come_after_a_full_path_admission_and_notices_follow_the_outbox() -> None:
    timers: list[tuple[float, Callable[[float], None]]] = []
    host = _Host(limit=3)
    cfg = SimLeaseConfig(call_s=0.01)
    leases = SimLeases(cfg, 1, host, timers.append)
    assert leases.take(0, _req("r0"), 0.0) is None  # no grant yet: the full path
    assert host.grants == []  # nor is one asked for before a full-path admission
    leases.admitted(0, "m", 0.0)
    _run(timers, 0.015)
    assert host.grants == [0.01]  # the grant request reached the scheduler
    assert leases.take(0, _req("r1"), 0.015) is None  # its answer is still on its way
    _run(timers, 0.02)
    assert leases.take(0, _req("r1"), 0.03) == "a"
    assert leases.unnoticed("r1")
    # the ledger holds unspent credits: the notice waits the headroom interval (100 ms)
    _run(timers, 0.12)
    assert host.noticed == []
    _run(timers, 0.14)
    assert [(rid, app) for rid, app, _ in host.noticed] == [("r1", "a")]
    assert host.noticed[0][2] == pytest.approx(0.14)
    assert not leases.unnoticed("r1")


def test_the_last_credit_sends_its_notice_at_once_and_a_report_waits_for_its_notice() -> None:
    timers: list[tuple[float, Callable[[float], None]]] = []
    host = _Host(limit=1)
    leases = SimLeases(SimLeaseConfig(call_s=0.01), 1, host, timers.append)
    leases.admitted(0, "m", 0.0)
    _run(timers, 0.05)
    assert leases.take(0, _req("r1"), 0.05) == "a"  # the last credit: flushed at once
    reported: list[float] = []
    leases.hold("r1", reported.append)  # its report came before the notice
    _run(timers, 0.059)
    assert host.noticed == [] and reported == []
    _run(timers, 0.061)
    assert [n[0] for n in host.noticed] == ["r1"] and reported == [pytest.approx(0.06)]
    # the next grant is still on its way (the timers ran to 0.061): the one credit is spent
    assert leases.take(0, _req("r2"), 0.065) is None
    leases.finished("r1", 0.066)  # r1's stream ended: its seat comes back to this ingress
    assert leases.take(0, _req("r2"), 0.066) == "a"


def _light(stack: str, fast_path: bool) -> Simulator:
    """Two CPU replicas of the tiny model, 2 seats each, at a light load behind the ingress."""
    cluster, reqs = tiny_cpu_cluster(requests=150, rate_rps=3.0)
    ingress = SimIngressConfig(
        delivered_guard=NO_GUARD,
        routing="fewest-ongoing",
        fast_path=SimLeaseConfig(enabled=fast_path, call_s=0.002),
    )
    view = LiveViewConfig(report_delays_s=(0.02,))
    return Simulator(cluster, STACKS.create(stack), reqs, ingress=ingress, live_view=view)


@pytest.mark.parametrize(
    ("stack", "fast_path", "on_credit"),
    [
        ("ray-serve-llm", True, True),  # power of two choices agrees with the fast path
        ("ray-serve-llm", False, False),  # the fast path off: every arrival asks the scheduler
        ("vllm-fcfs", True, False),  # round robin takes no leases: no credit is ever granted
    ],
)
def test_with_headroom_arrivals_go_on_credits_and_the_books_end_empty(
    stack: str, fast_path: bool, on_credit: bool
) -> None:
    sim = _light(stack, fast_path)
    records = sim.run().records
    assert all(r.finished for r in records)
    placed = sim.leases.placed if sim.leases is not None else 0
    assert (placed > 0) is on_credit
    adm = sim.scheduler.admission
    assert all(not rep.in_flight for rep in adm.replicas.values())  # every report was booked
    assert adm.admitted == len(records)  # placements on credits are booked as admissions
