"""Tenant usage across shards (services/scheduler/shard_usage.py, the VTC's `charged` and
`absorb`): a peer's cumulative charges become deltas once, a restarted peer or a stale report
adds nothing, staleness is the oldest live peer's report age, and a shard that absorbs its
peers' charges picks tenants by their service across both."""

from __future__ import annotations

from services.scheduler.core.fairness.vtc import VirtualTokenCounter
from services.scheduler.shard_usage import UsageLedger


def test_cumulative_reports_become_deltas_once() -> None:
    ledger = UsageLedger()
    assert ledger.merge("s1", "e1", 1.0, {"a": 100.0}) == {}  # the baseline
    assert ledger.merge("s1", "e1", 2.0, {"a": 150.0, "b": 10.0}) == {"a": 50.0, "b": 10.0}
    assert ledger.merge("s1", "e1", 3.0, {"a": 150.0, "b": 10.0}) == {}
    assert ledger.merge("s1", "e1", 2.5, {"a": 999.0}) == {}  # older than the last: ignored
    assert ledger.merge("s1", "e2", 4.0, {"a": 5.0}) == {}  # restarted: a new baseline
    assert ledger.merge("s1", "e2", 5.0, {"a": 7.0}) == {"a": 2.0}
    assert ledger.merge("s1", "e2", 6.0, {}) == {}  # the peer forgot "a"
    assert ledger.tenants == 0  # and so does the ledger


def test_staleness_is_the_oldest_live_peers_report_age() -> None:
    ledger = UsageLedger()
    ledger.merge("s1", "e", 10.0, {})
    ledger.merge("s2", "e", 9.5, {})
    assert ledger.staleness_s(10.2, {"s1", "s2"}) == 10.2 - 9.5
    assert ledger.staleness_s(10.2, {"s1"}) == 10.2 - 10.0
    ledger.forget("s1")
    assert ledger.staleness_s(10.2, {"s1"}) == 0.0


def test_charged_excludes_lifts_and_absorbed_service() -> None:
    vtc = VirtualTokenCounter()
    vtc.enqueued("a")
    vtc.charge_dispatch("r1", "a", 10, 20.0)
    vtc.charge_finish("r1", 25)
    vtc.enqueued("b")  # lifted to a's counter
    assert vtc.counters["b"] == 35.0
    assert vtc.charged == {"a": 35.0}
    vtc.absorb("b", 100.0)
    vtc.absorb("stranger", 100.0)  # no state here: nothing kept
    assert vtc.counters["b"] == 135.0
    assert "stranger" not in vtc.counters
    assert vtc.charged == {"a": 35.0}
    vtc.charge_dispatch("r2", "b", 5, 5.0)
    vtc.refund("r2", 5)
    assert vtc.charged["b"] == 0.0


def test_two_shards_exchanging_usage_pick_like_one_counter() -> None:
    """Tenant a is served only on shard 1, b only on shard 2; each shard also has both queued.
    Without the exchange each shard would think its idle tenant is behind; with it, both
    shards agree on whose turn it is, as one counter would."""
    s1, s2 = VirtualTokenCounter(), VirtualTokenCounter()
    l1, l2 = UsageLedger(), UsageLedger()
    for vtc in (s1, s2):
        vtc.enqueued("a")
        vtc.enqueued("b")
    l1.merge("s2", "e", 0.0, dict(s2.charged))
    l2.merge("s1", "e", 0.0, dict(s1.charged))
    s1.charge_dispatch("r1", "a", 0, 300.0)  # a got 300 tokens on shard 1
    s2.charge_dispatch("r2", "b", 0, 100.0)  # b got 100 on shard 2
    for tenant, delta in l1.merge("s2", "e", 1.0, dict(s2.charged)).items():
        s1.absorb(tenant, delta)
    for tenant, delta in l2.merge("s1", "e", 1.0, dict(s1.charged)).items():
        s2.absorb(tenant, delta)
    assert s1.pick(["a", "b"]) == s2.pick(["a", "b"]) == "b"
    assert s1.counters == s2.counters == {"a": 300.0, "b": 100.0}
