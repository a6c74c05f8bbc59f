"""The scheduler's Prometheus metrics, through ray.serve.metrics.

Ray's exporter serves them as `ray_<name>` (deploy/grafana/README.md lists them as scraped).
Gauges are re-set every few seconds: Ray drops a gauge not set for two report intervals (~20 s),
and an idle or stuck mesh must not vanish from the dashboard.

Per-tenant gauges are set at most once per REFRESH_S, not on every event, and for a bounded
set of tenants (`TenancyConfig.max_tenant_series`: the first live tenants keep their label
while the VTC keeps them; the rest are one `other` series), so neither the cost of an event
nor the number of series grows with the number of tenants.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from services.scheduler.core.admission import AdmissionCore
from services.scheduler.prefix_metrics import PrefixMetrics
from shared.metrics.fairness import jain
from shared.metrics.summary import band_name

REFRESH_S = 5.0
"""How often the gauges are re-set without a dispatch (Ray drops them after ~20 s), and how
often the per-tenant ones are set at most."""
OTHER_TENANTS = "other"
"""The `tenant` label of the tenants beyond max_tenant_series."""

POLICY_EVENTS = (
    "replans",
    "reordered_groups",
    "predicted_violations",
    "rejected_infeasible",
    "rebalances",
    "reclusters",
    "instances_lost",
)
"""Counters of a queueing policy's `stats` (QLMStats) exported as events."""


class SchedulerMetrics:
    """In flight and evicted per replica, the global queue, each virtual queue, and the queueing
    policy's events."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        from ray.serve import metrics

        self._clock = clock

        self.in_flight = metrics.Gauge(
            "slomesh_in_flight_requests",
            "requests admitted to the replica and not yet finished",
            tag_keys=("serving_replica",),
        )
        self._evicted = metrics.Gauge(
            "slomesh_evicted_requests",
            "requests evicted from the replica and waiting to resume",
            tag_keys=("serving_replica",),
        )
        self._queued = metrics.Gauge(
            "slomesh_queued_requests",
            "requests held in the scheduler's global queue (queueing policies)",
        )
        self._vq_depth = metrics.Gauge(
            "slomesh_virtual_queue_requests",
            "queued requests per virtual queue (qlm: the groups ordered for one replica)",
            tag_keys=("virtual_queue",),
        )
        self._policy_events = metrics.Counter(
            "slomesh_scheduler_policy_events_total",
            "queueing-policy events: " + ", ".join(POLICY_EVENTS),
            tag_keys=("event",),
        )
        self._queue_wait = metrics.Histogram(
            "slomesh_queue_wait_seconds",
            "time a request waited in the scheduler's queue before a replica pulled it, by band",
            [0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0],
            tag_keys=("band",),
        )
        self._virtual_tokens = metrics.Gauge(
            "slomesh_tenant_virtual_tokens",
            "a tenant's virtual token counter (VTC: weighted tokens charged; fairness picks the "
            "smallest among tenants with queued work); `other`: the mean of the tenants beyond "
            "the labelled ones",
            tag_keys=("tenant",),
        )
        self._charged = metrics.Gauge(
            "slomesh_tenant_charged_tokens",
            "tokens dispatched per tenant (input + predicted output, corrected to the actual); "
            "`other`: the sum of the tenants beyond the labelled ones",
            tag_keys=("tenant",),
        )
        self._jain = metrics.Gauge(
            "slomesh_tenant_jain_index",
            "Jain's index of the weighted tokens dispatched since the last report to the tenants "
            "with queued work (backlogged tenants' max-min fair shares are equal per weight)",
        )
        self._prefix = PrefixMetrics()
        """Prefix hit rate, tokens and pins from the policy's prefix index."""
        self._last_charged: dict[str, float] = {}
        self._labelled: set[str] = set()
        """Tenants exported under their own name (at most max_tenant_series)."""
        self._tenants_at: float | None = None
        """When the per-tenant gauges were last set (monotonic seconds)."""
        self._seen: dict[str, int] = {}
        self._refresher: asyncio.Task[None] | None = None

    def report(self, core: AdmissionCore) -> None:
        """Set the gauges from `core` and count the policy's new events; from the first call
        on an event loop, again every REFRESH_S."""
        if self._refresher is None:
            with contextlib.suppress(RuntimeError):  # no running loop: called outside Serve
                self._refresher = asyncio.get_running_loop().create_task(self._refresh(core))
        for name, rep in core.replicas.items():
            self.in_flight.set(len(rep.in_flight), tags={"serving_replica": name})
            self._evicted.set(len(rep.evicted), tags={"serving_replica": name})
        self._queued.set(core.queued)
        vqs = getattr(core.policy, "vqs", None)
        grouper = getattr(core.policy, "grouper", None)
        if vqs is not None and grouper is not None:  # QLM's virtual queues
            sizes = {g.group_id: g.size for g in grouper.groups()}
            for queue in vqs.names():
                depth = sum(sizes.get(g, 0) for g in vqs.order(queue))
                self._vq_depth.set(depth, tags={"virtual_queue": queue})
        self._report_tenants(core)
        self._prefix.report(core.policy)
        stats = getattr(core.policy, "stats", None)
        for event in POLICY_EVENTS if stats is not None else ():
            value = int(getattr(stats, event, 0))
            delta = value - self._seen.get(event, 0)
            self._seen[event] = value
            if delta > 0:  # Ray refuses inc(0): a counter appears with its first event
                self._policy_events.inc(delta, tags={"event": event})

    def queue_wait(self, criticality: int, seconds: float) -> None:
        """A queued request was pulled after `seconds` in the queue."""
        self._queue_wait.observe(seconds, tags={"band": band_name(criticality)})

    def _report_tenants(self, core: AdmissionCore) -> None:
        """VTC counters and charged tokens per labelled tenant (the rest as `other`), and Jain's
        index of the weighted tokens dispatched since the last report among the tenants with
        queued work; at most once per REFRESH_S."""
        selector = getattr(core.policy, "selector", None)
        if selector is None:  # not a queueing policy with tenancy
            return
        now = self._clock()
        if self._tenants_at is not None and now - self._tenants_at < REFRESH_S:
            return
        self._tenants_at = now
        vtc = selector.vtc
        cap = selector.cfg.max_tenant_series
        self._labelled &= vtc.counters.keys()  # forgotten tenants free their label
        for tenant in vtc.counters:
            if len(self._labelled) >= cap:
                break
            self._labelled.add(tenant)
        rest_counters, rest_charged = [], 0.0
        for tenant, value in vtc.counters.items():
            charged = vtc.served_tokens.get(tenant, 0.0)
            if tenant in self._labelled:
                self._virtual_tokens.set(value, tags={"tenant": tenant})
                self._charged.set(charged, tags={"tenant": tenant})
            else:
                rest_counters.append(value)
                rest_charged += charged
        if rest_counters:
            mean = sum(rest_counters) / len(rest_counters)
            self._virtual_tokens.set(mean, tags={"tenant": OTHER_TENANTS})
            self._charged.set(rest_charged, tags={"tenant": OTHER_TENANTS})
        active = set(vtc.active)
        shares = [
            (charged - self._last_charged.get(tenant, 0.0)) / vtc.weight_of(tenant)
            for tenant, charged in vtc.served_tokens.items()
            if tenant in active
        ]
        self._last_charged = dict(vtc.served_tokens)
        self._jain.set(jain(shares))

    async def _refresh(self, core: AdmissionCore) -> None:
        while True:
            await asyncio.sleep(REFRESH_S)
            self.report(core)
