"""What the ingress reports about each finished or rejected request (its metrics hook).

The pipeline stays free of any metrics library: it calls a `RequestObserver`; the deployment
plugs in `ServeMetricsObserver`, which exports through Ray Serve's metrics API (Prometheus).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Protocol

from shared.metrics.records import RequestRecord
from shared.metrics.summary import band_name


class RequestObserver(Protocol):
    def finished(self, record: RequestRecord) -> None:
        """A request ended (finished, aborted or failed); `record.slo_met` says how it went."""
        ...

    def rejected(self, slo_class: str, reason: str) -> None:
        """Admission rejected a request."""
        ...


class NullObserver:
    def finished(self, record: RequestRecord) -> None:
        pass

    def rejected(self, slo_class: str, reason: str) -> None:
        pass


# the preset classes' TTFT SLOs (0.5, 3, 15, 20, 60 s) and TPOT targets (30, 50 ms) are bounds
_LATENCY_BOUNDS_S = [
    *(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 3.0, 5.0),
    *(10.0, 15.0, 20.0, 30.0, 60.0, 300.0),
]
_TPOT_BOUNDS_S = [0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.2, 0.5, 1.0]

REJECTION_KINDS: tuple[tuple[str, str], ...] = (
    ("shed", "sheddable_shed"),
    ("ingress at capacity", "ingress_capacity"),
    ("rate limit", "rate_limited"),
    ("serves model", "no_replica"),
    ("(max_queued_requests)", "queue_full"),
    ("predicted TTFT", "predicted_infeasible"),
    ("predicted time per output token", "predicted_infeasible"),
    ("requests in flight", "replicas_full"),
    ("queued ahead drain", "queue_drain"),
    ("cannot be met from the queue", "queue_deadline"),
)
"""(substring of the reason text, `reason` label): a bounded label set for the dashboard; the
texts are those of the ingress and the scheduler's admission core and policies. The first
match wins: a prediction's text ("predicted TTFT 1.2 s at 13 requests in flight ...", the
ingress's guard on delivered latency) also names the requests in flight it was made at."""


def rejection_kind(reason: str) -> str:
    """The `reason` label of a rejection reason text; `other` for texts not listed."""
    for needle, kind in REJECTION_KINDS:
        if needle in reason:
            return kind
    return "other"


OTHER_TENANTS = "other"
"""The `tenant` label of every tenant beyond the bounded set."""


class TenantLabels:
    """A bounded set of `tenant` label values: the first `max_labels` tenants seen (and the
    `pinned` ones: anonymous, the overflow tenant) keep their name; every later one is
    `other`. Ray's counters never drop a series, so the set must be bounded for good."""

    def __init__(
        self, max_labels: int = 64, pinned: frozenset[str] = frozenset({"anonymous", "overflow"})
    ) -> None:
        self.max_labels = max_labels
        self._pinned = pinned
        self._labels: set[str] = set()

    def __call__(self, tenant: str) -> str:
        if tenant in self._labels or tenant in self._pinned:
            return tenant
        if len(self._labels) < self.max_labels:
            self._labels.add(tenant)
            return tenant
        return OTHER_TENANTS


def outcome(record: RequestRecord) -> str:
    """`met` (SLO met), `missed` (finished late) or `failed` (no first token, or never
    finished: aborted by the client or failed mid-stream)."""
    if record.slo_met:
        return "met"
    return "missed" if record.finished else "failed"


class ServeMetricsObserver:
    """Prometheus metrics through ray.serve.metrics. Ray's exporter prefixes every name with
    `ray_` (`ray_slomesh_ttft_seconds_bucket`); counters are registered with their `_total`.
    Serve adds the labels application, deployment and replica. See deploy/grafana/README.md."""

    def __init__(self, tenant_labels: TenantLabels | None = None) -> None:
        from ray.serve import metrics

        self._tenant_label = tenant_labels if tenant_labels is not None else TenantLabels()

        keys = ("model", "slo_class")
        self._ttft = metrics.Histogram(
            "slomesh_ttft_seconds",
            "time to first token (s)",
            _LATENCY_BOUNDS_S,
            tag_keys=keys,  # type: ignore[arg-type]  # ray hints tuple[str]
        )
        self._tpot = metrics.Histogram(
            "slomesh_tpot_seconds",
            "mean time per output token after the first (s)",
            _TPOT_BOUNDS_S,
            tag_keys=keys,  # type: ignore[arg-type]
        )
        self._slo_ttft = metrics.Gauge(
            "slomesh_slo_ttft_seconds",
            "TTFT SLO of the class (s), as its last finished request carried it",
            tag_keys=("slo_class",),
        )
        self._slo_tpot = metrics.Gauge(
            "slomesh_slo_tpot_seconds",
            "TPOT target of the class (s), as its last finished request carried it",
            tag_keys=("slo_class",),
        )
        self._requests = metrics.Counter(
            "slomesh_requests_total",
            "admitted requests by SLO outcome: met, missed (finished late), failed",
            tag_keys=("model", "slo_class", "outcome"),  # type: ignore[arg-type]
        )
        self._tokens = metrics.Counter(
            "slomesh_output_tokens_total",
            "output tokens streamed, by the SLO outcome of their request (met: goodput)",
            tag_keys=("model", "slo_class", "outcome"),  # type: ignore[arg-type]
        )
        self._rejected = metrics.Counter(
            "slomesh_rejected_total",
            "requests rejected at admission (429/503), by reason",
            tag_keys=("slo_class", "reason"),  # type: ignore[arg-type]
        )
        self._tenant_tokens = metrics.Counter(
            "slomesh_tenant_tokens_total",
            "tokens served per tenant and criticality band (kind: input, output; tenants "
            "beyond the bounded label set are counted as `other`)",
            tag_keys=("tenant", "band", "kind"),  # type: ignore[arg-type]
        )
        self._targets: dict[tuple[str, str], float] = {}
        """(gauge, class) -> SLO target, re-set every 5 s: Ray's exporter drops a gauge not set
        for ~20 s, and an idle class's target must stay on the dashboard."""
        self._refresher: asyncio.Task[None] | None = None

    def finished(self, record: RequestRecord) -> None:
        cls = record.class_name
        tags = {"model": record.model, "slo_class": cls}
        if record.ttft_s is not None:
            self._ttft.observe(record.ttft_s, tags=tags)
        if record.tpot_s is not None and record.output_tokens > 1:
            self._tpot.observe(record.tpot_s, tags=tags)
        self._target("ttft", cls, record.ttft_deadline_s)
        if record.tpot_target_s is not None:
            self._target("tpot", cls, record.tpot_target_s)
        if self._refresher is None:
            with contextlib.suppress(RuntimeError):  # no running loop: called outside Serve
                self._refresher = asyncio.get_running_loop().create_task(self._keep_targets())
        tags = {**tags, "outcome": outcome(record)}
        self._requests.inc(tags=tags)
        if record.output_tokens > 0:
            self._tokens.inc(record.output_tokens, tags=tags)
            who = {
                "tenant": self._tenant_label(record.tenant),
                "band": band_name(record.criticality),
            }
            self._tenant_tokens.inc(record.input_tokens, tags={**who, "kind": "input"})
            self._tenant_tokens.inc(record.output_tokens, tags={**who, "kind": "output"})

    def _target(self, kind: str, cls: str, value: float) -> None:
        """Set a class's target gauge when it changed (the refresher re-sets them all every
        5 s; a Ray metric call per request costs the ingress CPU for nothing)."""
        if self._targets.get((kind, cls)) == value:
            return
        self._targets[(kind, cls)] = value
        gauge = self._slo_ttft if kind == "ttft" else self._slo_tpot
        gauge.set(value, tags={"slo_class": cls})

    def _set_targets(self) -> None:
        for (kind, cls), value in self._targets.items():
            gauge = self._slo_ttft if kind == "ttft" else self._slo_tpot
            gauge.set(value, tags={"slo_class": cls})

    async def _keep_targets(self) -> None:
        while True:
            await asyncio.sleep(5.0)
            self._set_targets()

    def rejected(self, slo_class: str, reason: str) -> None:
        self._rejected.inc(tags={"slo_class": slo_class, "reason": rejection_kind(reason)})
