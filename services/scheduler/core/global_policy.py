"""The global-policy interface: what the cluster does on arrivals and after each engine step.

Baselines route each arrival to one instance (`RoutingPolicy`); QLM-style policies keep their own
queues and pull into instances from `on_step_end`. A policy never acts on an instance: every hook
writes its decisions into `out` (core/decisions.py), and the cluster core (core/cluster_core.py)
returns them as data for the simulator and the live scheduler to apply.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from services.scheduler.core.cluster_view import InstanceView
from services.scheduler.core.decisions import Decisions
from services.scheduler.core.routers.base import Router
from shared.domain import Request
from shared.domain.engine import SliceEntry


class GlobalPolicy(ABC):
    supports_leases: bool = False
    """Whether placements made outside the policy (an ingress's lease credits,
    core/leases.py) can be recorded with `on_placed` without breaking its own books."""

    @abstractmethod
    def on_arrival(
        self,
        request: Request,
        instances: Sequence[InstanceView],
        out: Decisions,
        now_s: float,
    ) -> None:
        """Place, queue or reject a newly admitted request."""

    def on_placed(
        self, request: Request, instance: InstanceView, out: Decisions, now_s: float
    ) -> None:
        """`request` already runs on `instance`, placed by an ingress with lease credits while
        the cluster had headroom (core/leases.py). Default: book it there."""
        out.place(request, instance, leased=True)

    def on_step_end(self, instance: InstanceView, out: Decisions, now_s: float) -> None:  # noqa: B027
        """Called after each engine step of `instance` (pulling, eviction). Default: nothing."""

    def on_finish(  # noqa: B027
        self, request: Request, instance: str, output_tokens: int, out: Decisions, now_s: float
    ) -> None:
        """`request` finished on `instance` with `output_tokens` tokens. Default: nothing."""

    def on_engine_reject(  # noqa: B027
        self, request: Request, instance: str, reason: str, out: Decisions, now_s: float
    ) -> None:
        """`instance`'s engine turned `request` away (SCORPIO's TTFT guard). Default: nothing."""

    def on_slice_end(self, entry: SliceEntry, instance: str, out: Decisions, now_s: float) -> None:
        """An unfinished request left `instance` at the end of its slice (pre-formed batches)."""
        raise NotImplementedError(
            f"{type(self).__name__} submits no pre-formed batches, so no slice can end: "
            f"request {entry.request.request_id} on {instance} would be lost"
        )

    def describe(self, request_id: str) -> dict[str, str | int | float]:
        """Where the policy holds a request (group, queue, position) for trace spans."""
        return {}

    def on_abort(self, request_id: str, out: Decisions, now_s: float) -> None:  # noqa: B027
        """A request the policy still queues was cancelled (client gone). Default: nothing."""

    def on_instance_lost(self, instance: str, out: Decisions, now_s: float) -> None:  # noqa: B027
        """`instance` failed or left the cluster. Default: nothing."""

    def on_instance_handed_over(  # noqa: B027
        self, instance: str, out: Decisions, now_s: float
    ) -> None:
        """Another scheduler shard took `instance` over: it runs what it holds to the end
        (their finishes still come here), and no new work may go there from here. Default:
        nothing (a policy without its own queues places nothing ahead)."""


class RoutingPolicy(GlobalPolicy):
    """Send each arrival straight to one eligible instance chosen by a router."""

    def __init__(self, router: Router) -> None:
        self.router = router
        self.supports_leases = router.fast_path_agrees

    def on_arrival(
        self,
        request: Request,
        instances: Sequence[InstanceView],
        out: Decisions,
        now_s: float,
    ) -> None:
        eligible = [i for i in instances if i.serves(request.model)]
        if not eligible:
            out.reject(request, f"no instance serves model '{request.model}'", now_s)
            return
        out.place(request, self.router.choose(request, eligible, now_s))
