"""Prefix-cache-aware placement around an SLO policy (`qlm` with `prefix.enabled`).

`PrefixPinnedPolicy` wraps a global policy (QLM in the `slomesh` stack). On each arrival it asks
`PrefixAffinity` (prefix_affinity.py) whether the request should be pinned to the replica
holding its prefix: if that replica saves it distinctly more prefill than the others and can
still give it its first token within its SLO slack, the request goes straight to that replica's
engine queue (EDF there, with SCORPIO's guards). Otherwise the wrapped policy places, queues or
rejects it exactly as without prefixes. Every placement, pinned or made by the wrapped policy
(QLM pulls later, from its virtual queues), updates the prefix index (core/pinning.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from services.scheduler.core.cluster_view import InstanceView
from services.scheduler.core.decisions import Decisions
from services.scheduler.core.global_policy import GlobalPolicy
from services.scheduler.core.pinning import PinningPolicy
from services.scheduler.core.prefix_affinity import PrefixAffinity
from shared.domain import Request


class PrefixPinnedPolicy(PinningPolicy):
    def __init__(self, inner: GlobalPolicy, affinity: PrefixAffinity) -> None:
        super().__init__(inner)
        self.affinity = affinity
        self._views: dict[str, InstanceView] = {}

    def _record(self, instance: str, request: Request) -> None:
        view = self._views.get(instance)
        if view is not None:
            self.affinity.record_placement(view, request)

    def _forget(self, instance: str) -> None:
        self.affinity.forget(instance)
        self._views.pop(instance, None)

    def _see(self, instance: InstanceView) -> None:
        self._views[instance.name] = instance

    def on_arrival(
        self,
        request: Request,
        instances: Sequence[InstanceView],
        out: Decisions,
        now_s: float,
    ) -> None:
        for i in instances:
            self._see(i)
        eligible = [i for i in instances if i.serves(request.model)]
        target = self.affinity.choose(request, eligible, now_s)
        if target is None:
            self._delegate(out, lambda: self.inner.on_arrival(request, instances, out, now_s))
            return
        self.affinity.record_placement(self._views[target], request)
        out.place(request, target)

    def on_finish(
        self, request: Request, instance: str, output_tokens: int, out: Decisions, now_s: float
    ) -> None:
        self.affinity.index.record_completion(instance, request)
        self.inner.on_finish(request, instance, output_tokens, out, now_s)
