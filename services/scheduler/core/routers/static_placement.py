"""A static placement: each model served by a fixed set of replicas, round-robin among them.

The baseline a fleet without model swapping runs when it has more models than replicas: models
are pinned to replicas once (by `placement`; else each replica keeps the model it starts with
and a model active nowhere goes to the replica with the fewest, at its first arrival) and never
move. A replica pinned to several models still swaps between them as its queue asks (its engine
holds one model at a time); a model never goes to a replica it is not pinned to.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from services.scheduler.core.cluster_view import InstanceView
from services.scheduler.core.routers.base import Router
from shared.domain import Request


class StaticParams(BaseModel):
    """Parameters of the static-placement router."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    placement: dict[str, list[int]] = Field(default_factory=dict)
    """Model -> positions (0-based) in the list of replicas that may serve it, in the cluster's
    order. A model not named here stays where the replicas start: pinned to the replicas that
    have it active at the first request, else, at its first arrival, to the replica with the
    fewest pinned models (ties: the first)."""


class StaticRouter(Router):
    name = "static"
    params_model = StaticParams

    def __init__(self, params: StaticParams | None = None) -> None:
        self.params = params or StaticParams()
        self._pinned: dict[str, list[str]] = {}
        self._next: dict[str, int] = {}
        self._started = False

    def _pin(self, model: str, eligible: Sequence[InstanceView]) -> list[str]:
        positions = self.params.placement.get(model)
        if positions is not None:
            bad = [p for p in positions if not 0 <= p < len(eligible)]
            if bad or not positions:
                raise ValueError(
                    f"placement.{model}: positions {positions} must be non-empty and within the "
                    f"{len(eligible)} replicas that serve it"
                )
            return [eligible[p].name for p in positions]
        counts = {i.name: 0 for i in eligible}
        for names in self._pinned.values():
            for n in names:
                if n in counts:
                    counts[n] += 1
        return [min(eligible, key=lambda i: counts[i.name]).name]

    def _pin_active(self, eligible: Sequence[InstanceView]) -> None:
        """Each replica keeps the model it starts with (those `placement` does not name)."""
        for inst in eligible:
            model = inst.status().active_model
            if model and model not in self.params.placement:
                self._pinned.setdefault(model, [])
                if inst.name not in self._pinned[model]:
                    self._pinned[model].append(inst.name)

    def choose(
        self, request: Request, eligible: Sequence[InstanceView], now_s: float
    ) -> InstanceView:
        if not self._started:
            self._started = True
            self._pin_active(eligible)
        names = self._pinned.get(request.model)
        if names is None:
            names = self._pinned[request.model] = self._pin(request.model, eligible)
        k = self._next.get(request.model, 0)
        self._next[request.model] = k + 1
        by_name = {i.name: i for i in eligible}
        pinned = [by_name[n] for n in names if n in by_name]
        return (pinned or list(eligible))[k % len(pinned or eligible)]
