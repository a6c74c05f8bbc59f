"""Prefix-cache-aware placement around an SLO policy (`qlm` with `prefix.enabled`).

`PrefixPinnedPolicy` wraps a global policy (QLM in the `slomesh` stack). On each arrival it asks
`PrefixAffinity` (prefix_affinity.py) whether the request should be pinned to the replica
holding its prefix: if that replica saves it distinctly more prefill than the others and can
still give it its first token within its SLO slack, the request goes straight to that replica's
engine queue (EDF there, with SCORPIO's guards). Otherwise the wrapped policy places, queues or
rejects it exactly as without prefixes. Every placement, pinned or made by the wrapped policy
(QLM pulls later, from its virtual queues), updates the prefix index: after each hook of the
wrapped policy, the placements it added to the event's decisions are recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from services.scheduler.core.cluster_view import InstanceView
from services.scheduler.core.decisions import Decisions
from services.scheduler.core.global_policy import GlobalPolicy
from services.scheduler.core.prefix_affinity import PrefixAffinity
from shared.domain import Request
from shared.domain.engine import SliceEntry


class PrefixPinnedPolicy(GlobalPolicy):
    def __init__(self, inner: GlobalPolicy, affinity: PrefixAffinity) -> None:
        self.inner = inner
        self.affinity = affinity
        self._views: dict[str, InstanceView] = {}

    def __getattr__(self, name: str) -> Any:  # stats, lengths, ... of the wrapped policy
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _record_since(self, out: Decisions, mark: int) -> None:
        """Tell the affinity index of every placement the wrapped policy made after `mark`."""
        for p in out.placements_since(mark):
            view = self._views.get(p.instance)
            if view is not None:
                self.affinity.record_placement(view, p.request)

    def on_arrival(
        self,
        request: Request,
        instances: Sequence[InstanceView],
        out: Decisions,
        now_s: float,
    ) -> None:
        for i in instances:
            self._views[i.name] = i
        eligible = [i for i in instances if i.serves(request.model)]
        target = self.affinity.choose(request, eligible, now_s)
        if target is None:
            mark = out.mark()
            self.inner.on_arrival(request, instances, out, now_s)
            self._record_since(out, mark)
            return
        self.affinity.record_placement(self._views[target], request)
        out.place(request, target)

    def on_placed(
        self, request: Request, instance: InstanceView, out: Decisions, now_s: float
    ) -> None:
        self._views[instance.name] = instance
        mark = out.mark()
        self.inner.on_placed(request, instance, out, now_s)
        self._record_since(out, mark)

    def on_step_end(self, instance: InstanceView, out: Decisions, now_s: float) -> None:
        self._views[instance.name] = instance
        mark = out.mark()
        self.inner.on_step_end(instance, out, now_s)
        self._record_since(out, mark)

    def on_finish(
        self, request: Request, instance: str, output_tokens: int, out: Decisions, now_s: float
    ) -> None:
        self.affinity.index.record_completion(instance, request)
        self.inner.on_finish(request, instance, output_tokens, out, now_s)

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
        self._views.pop(instance, None)
        mark = out.mark()
        self.inner.on_instance_lost(instance, out, now_s)
        self._record_since(out, mark)
