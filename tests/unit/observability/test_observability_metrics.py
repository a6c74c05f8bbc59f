"""What the ingress observer and the scheduler export, with ray.serve.metrics replaced by a
recorder that checks every call's tags against the metric's declared tag keys (Ray raises on a
mismatch only at run time, inside the mesh)."""

from __future__ import annotations

import time
from typing import Any, ClassVar

import pytest

from services.ingress.observer import ServeMetricsObserver, outcome, rejection_kind
from shared.domain import SLO, Request
from shared.metrics.records import RequestRecord


class FakeMetric:
    registry: ClassVar[dict[str, FakeMetric]] = {}

    def __init__(
        self,
        name: str,
        description: str = "",
        boundaries: list[float] | None = None,
        tag_keys: tuple[str, ...] | None = None,
    ) -> None:
        self.name, self.tag_keys = name, tuple(tag_keys or ())
        self.values: dict[tuple[tuple[str, str], ...], float] = {}
        self.sets = 0
        FakeMetric.registry[name] = self

    def _key(self, tags: dict[str, str] | None) -> tuple[tuple[str, str], ...]:
        assert set(tags or {}) == set(self.tag_keys), (self.name, tags, self.tag_keys)
        return tuple(sorted((tags or {}).items()))

    def set(self, value: float, tags: dict[str, str] | None = None) -> None:
        self.values[self._key(tags)] = value
        self.sets += 1

    def inc(self, value: float = 1.0, tags: dict[str, str] | None = None) -> None:
        assert value > 0, "Ray's Counter.inc refuses values <= 0"
        key = self._key(tags)
        self.values[key] = self.values.get(key, 0.0) + value

    def observe(self, value: float, tags: dict[str, str] | None = None) -> None:
        self.inc(1.0, tags)  # counts observations


@pytest.fixture
def metrics(monkeypatch: pytest.MonkeyPatch) -> dict[str, FakeMetric]:
    from ray.serve import metrics as serve_metrics

    FakeMetric.registry = {}
    for kind in ("Counter", "Gauge", "Histogram"):
        monkeypatch.setattr(serve_metrics, kind, FakeMetric)
    return FakeMetric.registry


def record(slo: SLO, first_s: float | None, finish_s: float | None, tokens: int) -> RequestRecord:
    req = Request("r", "llama", 10, 20, 0.0, slo)
    return RequestRecord.from_request(req, "replica-0", first_s, finish_s, tokens)


CHAT = SLO(3.0, tpot_target_s=0.03, class_name="chat")


def test_outcomes() -> None:
    assert outcome(record(CHAT, 1.0, 1.2, 11)) == "met"
    assert outcome(record(CHAT, 4.0, 4.2, 11)) == "missed"  # TTFT 4 s > 3 s
    assert outcome(record(CHAT, 1.0, 2.0, 11)) == "missed"  # TPOT 0.1 s > 0.03 s
    assert outcome(record(CHAT, None, None, 0)) == "failed"  # no first token


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        ("ingress at capacity", "ingress_capacity"),
        ("rate limited", "rate_limited"),
        ("no replica serves model 'x'", "no_replica"),
        ("no instance serves model 'x'", "no_replica"),
        ("overloaded: 10000 requests queued (max_queued_requests)", "queue_full"),
        ("overloaded: all 2 replicas of 'm' have 4 requests in flight", "replicas_full"),
        (
            "overloaded: 12 requests queued ahead drain in ~9.0 s, more than this request may "
            "wait (8.0 s)",
            "queue_drain",
        ),
        ("overloaded: TTFT deadline cannot be met from the queue", "queue_deadline"),
        (
            "predicted TTFT 250.0s exceeds 10x the 'interactive' SLO of 20s (qlm: capacity "
            "short, scale up)",
            "predicted_infeasible",
        ),
        ("something new", "other"),
    ],
)
def test_rejection_reasons_map_to_a_bounded_label(reason: str, kind: str) -> None:
    assert rejection_kind(reason) == kind


def test_observer_exports_latency_slo_targets_outcomes_goodput_and_rejections(
    metrics: dict[str, FakeMetric],
) -> None:
    obs = ServeMetricsObserver()
    obs.finished(record(CHAT, 1.0, 1.2, 11))
    obs.finished(record(CHAT, 4.0, 4.2, 11))
    obs.finished(record(SLO(20.0, class_name="interactive"), None, None, 0))
    obs.rejected("chat", "overloaded: TTFT deadline cannot be met from the queue")
    obs.rejected("", "ingress at capacity")

    chat = (("model", "llama"), ("slo_class", "chat"))
    assert metrics["slomesh_ttft_seconds"].values == {chat: 2}
    assert metrics["slomesh_tpot_seconds"].values == {chat: 2}
    assert metrics["slomesh_slo_ttft_seconds"].values == {
        (("slo_class", "chat"),): 3.0,
        (("slo_class", "interactive"),): 20.0,
    }
    assert metrics["slomesh_slo_tpot_seconds"].values == {(("slo_class", "chat"),): 0.03}
    requests = metrics["slomesh_requests_total"].values
    assert requests == {
        (("model", "llama"), ("outcome", "met"), ("slo_class", "chat")): 1,
        (("model", "llama"), ("outcome", "missed"), ("slo_class", "chat")): 1,
        (("model", "llama"), ("outcome", "failed"), ("slo_class", "interactive")): 1,
    }
    tokens = metrics["slomesh_output_tokens_total"].values
    assert tokens[(("model", "llama"), ("outcome", "met"), ("slo_class", "chat"))] == 11
    assert metrics["slomesh_rejected_total"].values == {
        (("reason", "queue_deadline"), ("slo_class", "chat")): 1,
        (("reason", "ingress_capacity"), ("slo_class", "")): 1,
    }
    # a class's target is set when it changes, not per request (the refresher keeps it alive)
    assert metrics["slomesh_slo_ttft_seconds"].sets == 2
    obs.finished(record(SLO(5.0, class_name="interactive"), None, None, 0))
    assert metrics["slomesh_slo_ttft_seconds"].values[(("slo_class", "interactive"),)] == 5.0


def _scheduler(replicas: int) -> Any:
    from services.scheduler.deployment import SchedulerDeployment

    cls = SchedulerDeployment.func_or_class  # the class under Serve's decorator
    args = {
        "replicas": [
            {"application": f"replica-{k}", "gpu": "A100-80GB", "model": "llama-3.1-8b"}
            for k in range(replicas)
        ],
        "max_num_seqs_per_replica": 1,
        "tracing": {"exporter": "none"},
    }
    sched = cls(args)
    for name in sched.core.replicas:  # every replica has answered its Status probe
        sched.core.record_probe(name, True, time.time())
    return sched


def test_scheduler_exports_in_flight_queue_depth_per_virtual_queue_and_policy_events(
    metrics: dict[str, FakeMetric],
) -> None:
    sched = _scheduler(2)
    now = time.time()
    for k in range(30):
        sched.core.admit(Request(f"r{k}", "llama-3.1-8b", 10, 20, now, SLO(20.0)), now)
    sched._report_policy_stats()

    in_flight = metrics["slomesh_in_flight_requests"].values
    assert {dict(k)["serving_replica"] for k in in_flight} == {"replica-0", "replica-1"}
    assert sum(in_flight.values()) == sum(len(r.in_flight) for r in sched.core.replicas.values())
    assert set(metrics["slomesh_evicted_requests"].values.values()) == {0}
    queued = sched.core.queued
    assert queued > 0 and metrics["slomesh_queued_requests"].values == {(): queued}
    per_vq = metrics["slomesh_virtual_queue_requests"].values
    assert {dict(k)["virtual_queue"] for k in per_vq} == {"replica-0", "replica-1"}
    assert sum(per_vq.values()) == queued  # every queued request is in one virtual queue

    events = metrics["slomesh_scheduler_policy_events_total"]
    before = dict(events.values)
    sched._report_policy_stats()  # no new events: no increments (Ray refuses inc(0))
    assert events.values == before
    for key, value in events.values.items():
        assert value == getattr(sched.core.policy.stats, dict(key)["event"])
