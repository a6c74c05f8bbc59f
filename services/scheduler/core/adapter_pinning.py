"""LoRA-adapter-aware placement around an SLO policy (`qlm` with `adapter.enabled`).

`AdapterPinnedPolicy` wraps a global policy (QLM, itself maybe wrapped for prefixes). On each
arrival of a request naming an adapter it asks `AdapterAffinity` (adapter_affinity.py) where
the request should run: a replica holding the adapter with the slack for it, else the one
where loading it costs least. The request goes straight to that replica's engine queue, after
an adapter-load decision when the replica must load it. When no replica has the slack, or the
request names no adapter, the wrapped policy places, queues or rejects it exactly as without
adapters. Every placement, pinned or made by the wrapped policy (QLM pulls later, from its
virtual queues), updates the adapter index.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.scheduler.core.adapter_affinity import AdapterAffinity
from services.scheduler.core.cluster_view import InstanceView
from services.scheduler.core.decisions import Decisions
from services.scheduler.core.global_policy import GlobalPolicy
from services.scheduler.core.pinning import PinningPolicy
from shared.domain import Request


class AdapterPinnedPolicy(PinningPolicy):
    def __init__(self, inner: GlobalPolicy, affinity: AdapterAffinity) -> None:
        super().__init__(inner)
        self.affinity = affinity

    def _record(self, instance: str, request: Request) -> None:
        self.affinity.record_placement(instance, request)

    def _forget(self, instance: str) -> None:
        self.affinity.forget(instance)

    def on_arrival(
        self,
        request: Request,
        instances: Sequence[InstanceView],
        out: Decisions,
        now_s: float,
    ) -> None:
        eligible = [i for i in instances if i.serves(request.model)]
        best = self.affinity.choose(request, eligible, now_s)
        if best is None or request.adapter is None:
            self._delegate(out, lambda: self.inner.on_arrival(request, instances, out, now_s))
            return
        if not best.loaded:
            out.load_adapter(best.replica, request.model, request.adapter)
        self.affinity.record_placement(best.replica, request)
        out.place(request, best.replica)

    def on_placed(
        self, request: Request, instance: InstanceView, out: Decisions, now_s: float
    ) -> None:
        self.affinity.record_placement(instance.name, request)
        super().on_placed(request, instance, out, now_s)
