"""Tenancy metrics: per-tenant tokens (ingress), per-band queue wait, VTC counters and Jain's
index (scheduler), through the same tag-checking recorder as test_observability_metrics."""

from __future__ import annotations

import pytest
from test_observability_metrics import FakeMetric

from services.ingress.observer import ServeMetricsObserver
from services.scheduler.core.admission import AdmissionCore
from services.scheduler.core.live_view import LiveReplica
from services.scheduler.core.policies import create_global_policy
from services.scheduler.metrics import SchedulerMetrics
from shared.domain import SLO, Request
from shared.metrics.records import RequestRecord


@pytest.fixture
def metrics(monkeypatch: pytest.MonkeyPatch) -> dict[str, FakeMetric]:
    from ray.serve import metrics as serve_metrics

    FakeMetric.registry = {}
    for kind in ("Counter", "Gauge", "Histogram"):
        monkeypatch.setattr(serve_metrics, kind, FakeMetric)
    return FakeMetric.registry


def test_ingress_counts_tokens_per_tenant_and_band(metrics: dict[str, FakeMetric]) -> None:
    obs = ServeMetricsObserver()
    req = Request("r", "llama", 10, 20, 0.0, SLO(3.0), tenant="acme", criticality=-1)
    obs.finished(RequestRecord.from_request(req, "replica-0", 1.0, 2.0, 7))
    tokens = {
        dict(k)["kind"]: (dict(k), v)
        for k, v in metrics["slomesh_tenant_tokens_total"].values.items()
    }
    assert tokens["input"] == ({"band": "sheddable", "kind": "input", "tenant": "acme"}, 10.0)
    assert tokens["output"] == ({"band": "sheddable", "kind": "output", "tenant": "acme"}, 7.0)


def test_scheduler_exports_vtc_counters_jain_and_band_queue_wait(
    metrics: dict[str, FakeMetric],
) -> None:
    rep = LiveReplica("replica-0", "cpu", "m", None, max_num_seqs=1)
    core = AdmissionCore([rep], create_global_policy("qlm"), "qlm", 64)
    m = SchedulerMetrics()
    for k in range(12):
        r = Request(f"r{k}", "m", 100, 20, 0.0, SLO(20.0), tenant=("a", "b")[k % 2])
        core.admit(r, 0.0)
    m.report(core)
    counters = metrics["slomesh_tenant_virtual_tokens"].values
    assert {dict(k)["tenant"] for k in counters} == {"a", "b"}
    jain = metrics["slomesh_tenant_jain_index"].values[()]
    assert 0.5 <= jain <= 1.0
    m.queue_wait(1, 0.3)
    m.queue_wait(-2, 0.1)
    waits = metrics["slomesh_queue_wait_seconds"].values
    assert set(waits) == {(("band", "critical"),), (("band", "sheddable"),)}


def test_scheduler_tenant_series_are_bounded_and_set_once_per_refresh(
    metrics: dict[str, FakeMetric],
) -> None:
    from services.scheduler.metrics import REFRESH_S

    policy = create_global_policy("qlm", {"tenancy": {"max_tenant_series": 3}})
    rep = LiveReplica("replica-0", "cpu", "m", None, max_num_seqs=1)
    core = AdmissionCore([rep], policy, "qlm", 64)
    clock = [0.0]
    m = SchedulerMetrics(clock=lambda: clock[0])
    for k in range(10):
        core.admit(Request(f"r{k}", "m", 100, 20, 0.0, SLO(20.0), tenant=f"t{k}"), 0.0)
    m.report(core)
    counters = metrics["slomesh_tenant_virtual_tokens"].values
    labels = {dict(k)["tenant"] for k in counters}
    assert len(labels) == 4 and "other" in labels  # 3 tenants by name, the rest folded
    charged = metrics["slomesh_tenant_charged_tokens"].values
    served = core.policy.selector.vtc.served_tokens  # type: ignore[attr-defined]
    assert sum(charged.values()) == pytest.approx(sum(served.values()))
    counters.clear()
    m.report(core)  # another event within REFRESH_S: no per-tenant work
    assert counters == {}
    clock[0] += REFRESH_S
    m.report(core)
    assert {dict(k)["tenant"] for k in counters} == labels  # labels stick while tenants live
