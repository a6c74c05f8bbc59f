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
from typing import Any

from services.scheduler.core.adapter_affinity import AdapterAffinity
from services.scheduler.core.cluster_view import InstanceView
from services.scheduler.core.decisions import Decisions
from services.scheduler.core.global_policy import GlobalPolicy
from shared.domain import Request
from shared.domain.engine import SliceEntry


class AdapterPinnedPolicy(GlobalPolicy):
    def __init__(self, inner: GlobalPolicy, affinity: AdapterAffinity) -> None:
        self.inner = inner
        self.affinity = affinity

    def __getattr__(self, name: str) -> Any:  # stats, lengths, ... of the wrapped policy
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _record_since(self, out: Decisions, mark: int) -> None:
        for p in out.placements_since(mark):
            self.affinity.record_placement(p.instance, p.request)

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
            mark = out.mark()
            self.inner.on_arrival(request, instances, out, now_s)
            self._record_since(out, mark)
            return
        if not best.loaded:
            out.load_adapter(best.replica, request.model, request.adapter)
        self.affinity.record_placement(best.replica, request)
        out.place(request, best.replica)

    def on_placed(
        self, request: Request, instance: InstanceView, out: Decisions, now_s: float
    ) -> None:
        self.affinity.record_placement(instance.name, request)
        mark = out.mark()
        self.inner.on_placed(request, instance, out, now_s)
        self._record_since(out, mark)

    def on_step_end(self, instance: InstanceView, out: Decisions, now_s: float) -> None:
        mark = out.mark()
        self.inner.on_step_end(instance, out, now_s)
        self._record_since(out, mark)

    def on_finish(
        self, request: Request, instance: str, output_tokens: int, out: Decisions, now_s: float
    ) -> None:
        mark = out.mark()
        self.inner.on_finish(request, instance, output_tokens, out, now_s)
        self._record_since(out, mark)

    def on_engine_reject(
        self, request: Request, instance: str, reason: str, out: Decisions, now_s: float
    ) -> None:
        mark = out.mark()
        self.inner.on_engine_reject(request, instance, reason, out, now_s)
        self._record_since(out, mark)

    def on_slice_end(self, entry: SliceEntry, instance: str, out: Decisions, now_s: float) -> None:
        mark = out.mark()
        self.inner.on_slice_end(entry, instance, out, now_s)
        self._record_since(out, mark)

    def describe(self, request_id: str) -> dict[str, str | int | float]:
        return self.inner.describe(request_id)

    def on_abort(self, request_id: str, out: Decisions, now_s: float) -> None:
        mark = out.mark()
        self.inner.on_abort(request_id, out, now_s)
        self._record_since(out, mark)

    def on_instance_lost(self, instance: str, out: Decisions, now_s: float) -> None:
        self.affinity.forget(instance)
        mark = out.mark()
        self.inner.on_instance_lost(instance, out, now_s)
        self._record_since(out, mark)
