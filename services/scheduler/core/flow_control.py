"""llm-d's flow control in front of a router: priority bands held while the pool is saturated.

Source read: llm-d/llm-d-router at commit ebab687927f5331c1b39defcb579a07951bce56c:
pkg/epp/flowcontrol/controller/internal/processor.go (the dispatch cycle),
pkg/epp/framework/plugins/flowcontrol/saturationdetector/utilization/{config,detector}.go,
pkg/epp/framework/plugins/flowcontrol/usagelimits/usagelimitpolicy.go (static limit 1.0),
pkg/epp/framework/plugins/flowcontrol/ordering/{fcfs,edf,slodeadline}/,
pkg/epp/framework/plugins/flowcontrol/fairness/globalstrict/ and
pkg/epp/flowcontrol/controller/config.go (request TTL 60 s). With w_k the waiting requests and
u_k the KV usage of endpoint k of the pool (N endpoints):

    saturation = (1/N) Σ_k max(w_k / queue_depth_threshold, u_k / kv_cache_util_threshold)

Each dispatch cycle walks the bands from the highest priority (criticality here) down; while
saturation < usage_limit it takes the head of the highest non-empty band, as the ordering
policy sorts it across all of the band's flows (global strict fairness), and hands it to the
router; at saturation every band waits (head-of-line blocking). A request queued longer than
`request_ttl_s` is answered with a rejection. Orderings: `fcfs` (arrival), `edf` (arrival +
TTL, llm-d's edf), `slo-deadline` (arrival + TTFT SLO, llm-d's slo-deadline-ordering-policy).
The cycle runs on each arrival, engine step and finish (llm-d: about every millisecond). When
no endpoint has work at all the head is dispatched whatever the saturation says, so a pool
whose KV usage stays high while idle cannot stall the queue.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from services.scheduler.core.cluster_view import InstanceView
from services.scheduler.core.decisions import Decisions
from services.scheduler.core.global_policy import GlobalPolicy
from services.scheduler.core.latency_slo_admitter import LatencySLOAdmitter
from services.scheduler.core.routers.base import Router
from shared.domain import Request


class FlowControlConfig(BaseModel):
    """llm-d's flow control with its utilisation saturation detector."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    ordering: Literal["fcfs", "edf", "slo-deadline"] = "slo-deadline"
    """Order inside a band (llm-d's default is fcfs)."""
    queue_depth_threshold: int = Field(5, ge=1)
    """Waiting requests at which an endpoint counts as saturated on compute."""
    kv_cache_util_threshold: float = Field(0.8, gt=0, le=1)
    """KV usage at which an endpoint counts as saturated on memory."""
    usage_limit: float = Field(1.0, gt=0)
    """Saturation at or above which every band waits."""
    request_ttl_s: float | None = Field(60.0, gt=0)
    """A request queued this long is rejected; None: never."""


def saturation(pool: Sequence[InstanceView], cfg: FlowControlConfig) -> float:
    total = 0.0
    for inst in pool:
        st = inst.status()
        kv = st.kv_used_blocks / st.kv_total_blocks if st.kv_total_blocks > 0 else 0.0
        total += max(st.waiting / cfg.queue_depth_threshold, kv / cfg.kv_cache_util_threshold)
    return total / len(pool) if pool else 1.0


class FlowControlPolicy(GlobalPolicy):
    """A router behind llm-d's latency-SLO admitter and flow control (each optional)."""

    def __init__(
        self,
        router: Router,
        flow: FlowControlConfig | None = None,
        admitter: LatencySLOAdmitter | None = None,
    ) -> None:
        self.router = router
        self.flow = flow
        self.admitter = admitter
        self.supports_leases = flow is None and router.fast_path_agrees
        self._bands: dict[int, list[Request]] = {}
        self._instances: Sequence[InstanceView] = ()

    def _key(self, r: Request) -> tuple[float, float, str]:
        assert self.flow is not None
        if self.flow.ordering == "slo-deadline":
            deadline = r.arrival_s + r.slo.ttft_deadline_s
        elif self.flow.ordering == "edf" and self.flow.request_ttl_s is not None:
            deadline = r.arrival_s + self.flow.request_ttl_s
        else:
            deadline = r.arrival_s
        return (deadline, r.arrival_s, r.request_id)

    def on_arrival(
        self,
        request: Request,
        instances: Sequence[InstanceView],
        out: Decisions,
        now_s: float,
    ) -> None:
        self._instances = instances
        eligible = [i for i in instances if i.serves(request.model)]
        if not eligible:
            out.reject(request, f"no instance serves model '{request.model}'", now_s)
            return
        if self.admitter is not None:
            why = self.admitter.rejection(request, eligible)
            if why is not None:
                out.reject(request, why, now_s)
                return
        if self.flow is None:
            out.place(request, self.router.choose(request, eligible, now_s))
            return
        self._bands.setdefault(request.criticality, []).append(request)
        self._dispatch(out, now_s)

    def _expire(self, out: Decisions, now_s: float) -> None:
        assert self.flow is not None
        ttl = self.flow.request_ttl_s
        if ttl is None:
            return
        for band in self._bands.values():
            late = [r for r in band if now_s - r.arrival_s >= ttl]
            for r in late:
                band.remove(r)
                out.reject(
                    r,
                    f"flow control: queued {ttl:g} s (request TTL)",
                    now_s,
                    drop_reason="deadline-expired",
                    queued=True,
                )

    def _dispatch(self, out: Decisions, now_s: float) -> None:
        if self.flow is None:
            return
        self._expire(out, now_s)
        while True:
            band = next((b for _, b in sorted(self._bands.items(), reverse=True) if b), None)
            if band is None:
                return
            head = min(band, key=self._key)
            pool = [i for i in self._instances if i.serves(head.model)]
            busy = any(i.status().waiting + i.status().running for i in pool)
            if busy and saturation(pool, self.flow) >= self.flow.usage_limit:
                return
            band.remove(head)
            out.place(head, self.router.choose(head, pool, now_s))

    def on_step_end(self, instance: InstanceView, out: Decisions, now_s: float) -> None:
        self._dispatch(out, now_s)

    def on_finish(
        self, request: Request, instance: str, output_tokens: int, out: Decisions, now_s: float
    ) -> None:
        self._dispatch(out, now_s)

    def on_abort(self, request_id: str, out: Decisions, now_s: float) -> None:
        for band in self._bands.values():
            band[:] = [r for r in band if r.request_id != request_id]

    def describe(self, request_id: str) -> dict[str, str | int | float]:
        for priority, band in self._bands.items():
            for r in band:
                if r.request_id == request_id:
                    return {"slomesh.flow_band": priority, "slomesh.flow_queued": len(band)}
        return {}
