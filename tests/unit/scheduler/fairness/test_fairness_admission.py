"""The live admission core with bands: drop reasons on every rejection, sheddable requests shed
first (a full queue makes room, a sheddable arrival waits behind every more critical request),
and queued requests the policy sheds handed to the shell to answer at once."""

from __future__ import annotations

import pytest

from services.scheduler.core.admission import DROP_REASONS, AdmissionCore
from services.scheduler.core.live_view import LiveReplica
from services.scheduler.core.policies import create_global_policy
from shared.domain import SLO, Request


def req(rid: str, criticality: int = 0, at: float = 0.0, ttft_s: float = 20.0) -> Request:
    return Request(
        rid, "m", 10, 20, at, SLO(ttft_s), tenant=f"t{criticality}", criticality=criticality
    )


def core(policy: str = "qlm", max_queued: int = 100_000, **opts: object) -> AdmissionCore:
    rep = LiveReplica("replica-0", "cpu", "m", None, max_num_seqs=1)
    return AdmissionCore([rep], create_global_policy(policy, opts), policy, 64, max_queued)


@pytest.mark.parametrize(
    ("model", "criticality", "drop"),
    [("other", 0, "no-replica"), ("m", -1, "sheddable-saturated"), ("m", 0, "queue-full")],
)
def test_rejections_carry_a_drop_reason(model: str, criticality: int, drop: str) -> None:
    c = core(max_queued=0)
    r = Request("x", model, 10, 20, 0.0, SLO(20.0), criticality=criticality)
    d = c.admit(r, 0.0)
    assert not d.admitted and d.drop_reason == drop and drop in DROP_REASONS


def test_full_queue_sheds_a_sheddable_request_for_a_more_critical_one() -> None:
    c = core(max_queued=4, tenancy={"shed": False})  # the policy lets sheddable work in
    k = 0
    while c.queued < 4:  # the engine window fills, then the queue
        assert c.admit(req(f"s{k}", -1, at=0.01 * k), 0.0).admitted
        k += 1
    newest = f"s{k - 1}"
    assert c.admit(req("s-more", -1, at=0.09), 0.0).drop_reason == "sheddable-saturated"
    d = c.admit(req("crit", 1), 0.1)
    assert d.admitted  # room was made
    shed = c.take_shed()
    assert [rid for rid, _ in shed] == [newest]  # the newest sheddable one
    assert c.take_shed() == []
    # a standard request cannot displace another standard one
    c2 = core(max_queued=2, tenancy={"shed": False})
    for k in range(8):
        c2.admit(req(f"n{k}", 0, at=0.01 * k), 0.0)
    assert c2.admit(req("n-late", 0), 0.1).drop_reason == "queue-full"


def test_policy_sheds_queued_sheddable_work_for_late_critical_work() -> None:
    c = core(tenancy={"shed_backlog_factor": 1e9})
    for k in range(6):
        assert c.admit(req(f"s{k}", -1, at=0.0), 0.0).admitted
    queued_shed = {r for r in c._queued if r.startswith("s")}
    assert queued_shed
    for k in range(40):  # critical requests with a 1 s SLO cannot all start in time
        c.admit(req(f"c{k}", 1, at=0.0, ttft_s=1.0), 0.0)
    shed = dict(c.take_shed())
    assert set(shed) == queued_shed
    assert all(r.startswith("shed:") for r in shed.values())
    assert not any(r.startswith("s") for r in c._queued)


def test_sheddable_arrival_counts_every_more_critical_request_as_ahead() -> None:
    c = core(tenancy={"shed": False})
    for k in range(20):
        c.admit(req(f"n{k}", 0, at=0.0, ttft_s=60.0), 0.0)
    assert c.queued >= 10
    for k in range(10):
        c.drain.record(0.1 * k)  # ~10 dispatches a second
    # its tight deadline comes before every queued one, but bands put them all ahead of it
    d = c.admit(req("s", -1, at=1.0, ttft_s=0.2), 1.0)
    assert not d.admitted and d.drop_reason == "sheddable-saturated"
    d = c.admit(req("n-tight", 0, at=1.0, ttft_s=0.2), 1.0)
    assert d.drop_reason != "sheddable-saturated"
