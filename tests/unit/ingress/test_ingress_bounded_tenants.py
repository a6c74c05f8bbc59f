"""Per-tenant state at the ingress stays bounded: header-named tenants beyond the cap share the
overflow tenant and idle ones are forgotten; rate-limit buckets are dropped once full and
refunded when the mesh rejects; the tenant label of the metrics comes from a bounded set."""

from __future__ import annotations

import pytest

from services.ingress.core.rate_limit import TokenRateLimiter
from services.ingress.core.tenancy import TenancyConfig, TenantSpec, resolve_tenancy
from services.ingress.core.tenant_table import TenantTable
from services.ingress.observer import OTHER_TENANTS, TenantLabels
from shared.domain import SLO, Request

GW = "x-gateway-inference-fairness-id"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_header_tenants_beyond_the_cap_share_the_overflow_tenant() -> None:
    clock = Clock()
    table = TenantTable(cap=3, idle_s=60.0, overflow="overflow", clock=clock)
    assert [table.admit(f"t{k}") for k in range(5)] == ["t0", "t1", "t2", "overflow", "overflow"]
    assert table.admit("t1") == "t1"  # a live tenant keeps its place
    assert len(table) == 3 and table.overflowed == 2


def test_idle_header_tenants_are_forgotten_and_free_their_place() -> None:
    clock = Clock()
    table = TenantTable(cap=2, idle_s=60.0, overflow="overflow", clock=clock)
    table.admit("a")
    clock.now = 30.0
    table.admit("b")
    clock.now = 70.0  # a idle for 70 s, b for 40 s
    assert table.admit("c") == "c"
    assert "a" not in table and "b" in table
    clock.now = 95.0  # b idle for 65 s: forgotten, c (25 s) kept
    assert table.admit("d") == "d" and "b" not in table and "c" in table


def test_many_distinct_fairness_ids_keep_the_table_at_its_cap() -> None:
    cfg = TenancyConfig(max_header_tenants=100, tenants={"acme": TenantSpec(weight=2.0)})
    tenants = {
        resolve_tenancy(None, 1.0, None, {GW: f"id-{k}"}, 0, cfg).tenant for k in range(10_000)
    }
    assert len(tenants) == 101 and "overflow" in tenants  # 100 named + the shared one
    assert len(cfg.table) == 100
    # a configured tenant is never counted against the cap, nor folded
    assert resolve_tenancy(None, 1.0, None, {GW: "acme"}, 0, cfg).weight == 2.0


def _req(tenant: str, tokens: int) -> Request:
    return Request("r", "m", tokens // 2, tokens - tokens // 2, 0.0, SLO(1.0), tenant=tenant)


def test_a_mesh_rejection_refunds_the_charge() -> None:
    lim = TokenRateLimiter()
    lim.admit(600, _req("t", 600), 0.0)
    assert lim.charge("t", 1, 600, 0.0) > 0  # spent
    lim.refund(600, _req("t", 600), 0.0)
    assert lim.charge("t", 600, 600, 0.0) == 0.0  # all of it back
    lim.refund(600, _req("t", 600), 1.0)
    lim.refund(600, _req("t", 600), 1.0)
    assert lim.charge("t", 600, 600, 1.0) == 0.0 and lim.charge("t", 1, 600, 1.0) > 0  # capped
    lim.refund(None, _req("u", 10), 1.0)  # no limit: nothing kept
    assert len(lim) == 1


def test_full_buckets_are_dropped_so_buckets_stay_bounded() -> None:
    lim = TokenRateLimiter()
    for k in range(1000):
        lim.charge(f"t{k}", 10, 600, k * 0.1)  # 1000 tenants over 100 s
    assert len(lim) <= 601  # only those touched in the last minute
    assert lim.charge("t999", 590, 600, 99.9) == 0.0  # what is kept is exact


def test_metric_tenant_labels_come_from_a_bounded_set() -> None:
    labels = TenantLabels(max_labels=3)
    got = [labels(f"t{k}") for k in range(6)]
    assert got == ["t0", "t1", "t2", OTHER_TENANTS, OTHER_TENANTS, OTHER_TENANTS]
    assert labels("t1") == "t1"
    assert labels("anonymous") == "anonymous" and labels("overflow") == "overflow"


def test_a_table_needs_a_place() -> None:
    with pytest.raises(ValueError, match="cap must be >= 1"):
        TenantTable(0, 1.0, "overflow")
