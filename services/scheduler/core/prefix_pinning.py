"""Prefix-cache-aware placement around an SLO policy (`qlm` with `prefix.enabled`).

`PrefixPinnedPolicy` wraps a global policy (QLM in the `slomesh` stack). On each arrival it asks
`PrefixAffinity` (prefix_affinity.py) whether the request should be pinned to the replica
holding its prefix: if that replica saves it distinctly more prefill than the others and can
still give it its first token within its SLO slack, the request goes straight to that replica's
engine queue (EDF there, with SCORPIO's guards). Otherwise the wrapped policy places, queues or
rejects it exactly as without prefixes. Every placement, pinned or made by the wrapped policy
(QLM pulls later, from its virtual queues), updates the prefix index: the wrapped policy sees
the instances through `_Recording` handles that report each `submit`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from services.scheduler.core.cluster_view import InstanceHandle, Rejector
from services.scheduler.core.global_policy import GlobalPolicy
from services.scheduler.core.prefix_affinity import PrefixAffinity
from shared.domain import Request
from shared.domain.engine import SliceEntry


class _Recording:
    """An InstanceHandle that tells the affinity index of every request submitted to it."""

    def __init__(self, inner: InstanceHandle, affinity: PrefixAffinity) -> None:
        self._inner = inner
        self._affinity = affinity

    def submit(self, request: Request, now_s: float) -> None:
        self._affinity.record_placement(self._inner, request)
        self._inner.submit(request, now_s)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class PrefixPinnedPolicy(GlobalPolicy):
    def __init__(self, inner: GlobalPolicy, affinity: PrefixAffinity) -> None:
        self.inner = inner
        self.affinity = affinity
        self._handles: dict[str, _Recording] = {}

    def __getattr__(self, name: str) -> Any:  # stats, lengths, ... of the wrapped policy
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _wrap(self, inst: InstanceHandle) -> InstanceHandle:
        handle = self._handles.get(inst.name)
        if handle is None or handle._inner is not inst:
            handle = _Recording(inst, self.affinity)
            self._handles[inst.name] = handle
        return handle

    def on_arrival(
        self,
        request: Request,
        instances: Sequence[InstanceHandle],
        rejector: Rejector,
        now_s: float,
    ) -> None:
        wrapped = [self._wrap(i) for i in instances]
        eligible = [i for i in instances if i.serves(request.model)]
        target = self.affinity.choose(request, eligible, now_s)
        if target is None:
            self.inner.on_arrival(request, wrapped, rejector, now_s)
            return
        self._handles[target].submit(request, now_s)

    def on_step_end(self, instance: InstanceHandle, now_s: float) -> None:
        self.inner.on_step_end(self._wrap(instance), now_s)

    def on_finish(self, request: Request, instance: str, output_tokens: int, now_s: float) -> None:
        self.affinity.index.record_completion(instance, request)
        self.inner.on_finish(request, instance, output_tokens, now_s)

    def on_engine_reject(self, request: Request, instance: str, reason: str, now_s: float) -> None:
        self.inner.on_engine_reject(request, instance, reason, now_s)

    def on_slice_end(self, entry: SliceEntry, instance: str, now_s: float) -> None:
        self.inner.on_slice_end(entry, instance, now_s)

    def describe(self, request_id: str) -> dict[str, str | int | float]:
        return self.inner.describe(request_id)

    def on_abort(self, request_id: str, now_s: float) -> None:
        self.inner.on_abort(request_id, now_s)

    def on_instance_lost(self, instance: str, now_s: float) -> None:
        self.affinity.forget(instance)
        self._handles.pop(instance, None)
        self.inner.on_instance_lost(instance, now_s)
