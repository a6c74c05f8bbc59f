"""A placement rule around an inner global policy: the shared shell of the pinning policies.

`PinningPolicy` wraps a global policy (QLM in the `slomesh` stack). A subclass decides on
arrival whether to pin the request to a replica itself (prefix_pinning.py, adapter_pinning.py);
every other hook goes to the wrapped policy unchanged. The subclass keeps an affinity index
of where requests run, so after each hook of the wrapped policy the placements it added to the
event's decisions are handed to `_record` (QLM places later, pulling from its virtual queues).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import Any

from services.scheduler.core.cluster_view import InstanceView
from services.scheduler.core.decisions import Decisions
from services.scheduler.core.global_policy import GlobalPolicy
from shared.domain import Request
from shared.domain.engine import SliceEntry


class PinningPolicy(GlobalPolicy):
    def __init__(self, inner: GlobalPolicy) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:  # stats, lengths, ... of the wrapped policy
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    @abstractmethod
    def _record(self, instance: str, request: Request) -> None:
        """Tell the affinity index that `request` runs on `instance`."""

    @abstractmethod
    def _forget(self, instance: str) -> None:
        """`instance` left the cluster: drop what the index knows of it."""

    def _see(self, instance: InstanceView) -> None:
        """The latest view of `instance` (from a hook that carries one). Default: nothing."""

    def _delegate(self, out: Decisions, hook: Callable[[], None]) -> None:
        """Run one hook of the wrapped policy and record the placements it added to `out`."""
        mark = out.mark()
        hook()
        for p in out.placements_since(mark):
            self._record(p.instance, p.request)

    def on_placed(
        self, request: Request, instance: InstanceView, out: Decisions, now_s: float
    ) -> None:
        self._see(instance)
        self._delegate(out, lambda: self.inner.on_placed(request, instance, out, now_s))

    def on_step_end(self, instance: InstanceView, out: Decisions, now_s: float) -> None:
        self._see(instance)
        self._delegate(out, lambda: self.inner.on_step_end(instance, out, now_s))

    def on_finish(
        self, request: Request, instance: str, output_tokens: int, out: Decisions, now_s: float
    ) -> None:
        self._delegate(
            out, lambda: self.inner.on_finish(request, instance, output_tokens, out, now_s)
        )

    def on_engine_reject(
        self, request: Request, instance: str, reason: str, out: Decisions, now_s: float
    ) -> None:
        self._delegate(
            out, lambda: self.inner.on_engine_reject(request, instance, reason, out, now_s)
        )

    def on_slice_end(self, entry: SliceEntry, instance: str, out: Decisions, now_s: float) -> None:
        self._delegate(out, lambda: self.inner.on_slice_end(entry, instance, out, now_s))

    def describe(self, request_id: str) -> dict[str, str | int | float]:
        return self.inner.describe(request_id)

    def on_abort(self, request_id: str, out: Decisions, now_s: float) -> None:
        self._delegate(out, lambda: self.inner.on_abort(request_id, out, now_s))

    def on_instance_lost(self, instance: str, out: Decisions, now_s: float) -> None:
        self._forget(instance)
        self._delegate(out, lambda: self.inner.on_instance_lost(instance, out, now_s))

    def on_instance_handed_over(self, instance: str, out: Decisions, now_s: float) -> None:
        self._forget(instance)
        self._delegate(out, lambda: self.inner.on_instance_handed_over(instance, out, now_s))
