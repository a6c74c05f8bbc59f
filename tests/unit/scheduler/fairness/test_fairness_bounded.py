"""Per-tenant state in the scheduler stays bounded: the VTC forgets idle tenants (never busy
ones), a forgotten tenant that returns is lifted like a new one, the selector keeps no set of
every tenant seen, and the QLM policy's state stays flat over many distinct tenant names."""

from __future__ import annotations

from services.scheduler.core.fairness.config import TenancyConfig
from services.scheduler.core.fairness.selector import GroupSelector
from services.scheduler.core.fairness.vtc import VirtualTokenCounter
from services.scheduler.core.policies import create_global_policy
from shared.domain import SLO, Request


def _req(rid: str, tenant: str, at: float, criticality: int = 0) -> Request:
    return Request(rid, "m", 100, 20, at, SLO(20.0), tenant=tenant, criticality=criticality)


def test_vtc_forgets_idle_tenants_but_never_busy_ones() -> None:
    v = VirtualTokenCounter()
    v.seen("idle", 0.0)
    v.charge_dispatch("r1", "idle", 100, 20)
    v.charge_finish("r1", 20)
    v.seen("queued", 0.0)
    v.enqueued("queued")
    v.seen("running", 0.0)
    v.charge_dispatch("r2", "running", 100, 20)
    assert v.forget_idle(599.0, 600.0) == 0  # nobody idle long enough yet
    assert v.forget_idle(600.0, 600.0) == 1
    assert "idle" not in v.counters and "idle" not in v.served_tokens
    assert {"queued", "running"} <= v.counters.keys() | set(v.active)
    v.charge_finish("r2", 20)  # done: idle from now on, looked at again idle_s later
    assert v.forget_idle(1199.0, 600.0) == 0
    assert v.forget_idle(1200.0, 600.0) == 1 and "running" not in v.counters


def test_a_forgotten_tenant_returns_level_with_the_active_ones() -> None:
    v = VirtualTokenCounter()
    v.seen("a", 0.0)
    v.charge_dispatch("r", "a", 1000, 0)
    v.charge_finish("r", 0)
    v.forget_idle(1000.0, 600.0)
    v.enqueued("b")
    v.counters["b"] = 250.0
    v.enqueued("a")
    assert v.counters["a"] == 250.0  # lifted to the active minimum, like any newcomer


def test_selector_contention_needs_no_set_of_tenants() -> None:
    sel = GroupSelector(TenancyConfig(tenant_idle_s=10.0))
    assert not sel.contended(_req("r0", "a", 0.0))
    assert not sel.contended(_req("r1", "a", 1.0))
    assert sel.contended(_req("r2", "b", 2.0))
    assert sel.vtc.tenants == 2
    sel.contended(_req("r3", "c", 100.0))  # a and b idle for 90 s: forgotten
    assert sel.vtc.tenants == 1 and sel.is_contended  # contention, once seen, stays


def test_qlm_state_stays_flat_over_many_tenant_names() -> None:
    from services.scheduler.core.admission import AdmissionCore
    from services.scheduler.core.live_view import LiveReplica

    rep = LiveReplica("replica-0", "cpu", "m", None, max_num_seqs=4)
    core = AdmissionCore([rep], create_global_policy("qlm"), "qlm", 10_000)
    selector = core.policy.selector  # type: ignore[attr-defined]
    sizes = []
    for k in range(3000):
        now = k * 1.0  # one arrival a second; the default idle time is 600 s
        req = _req(f"r{k}", f"tenant-{k}", now)
        core.admit(req, now)
        core.take_dispatched()
        core.report(req.request_id, 20, now + 0.5)
        sizes.append(selector.vtc.tenants)
    assert 600 <= max(sizes) <= 700, max(sizes)  # the last 600 s of tenants, not all 3000
