"""Router interface: pick one instance among those that serve the request's model."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import BaseModel

from services.scheduler.core.cluster_view import InstanceView
from shared.domain import Request


class Router(ABC):
    name: ClassVar[str]
    params_model: ClassVar[type[BaseModel] | None] = None
    """The router's parameters (a stack's `placer` params); None: it takes none."""
    fast_path_agrees: ClassVar[bool] = True
    """Whether the ingress's lease fast path may place for this router: while a replica has a
    free seat the fast path puts a request on the replica with the most credit left (the
    freest), the choice a load-aware router makes there too. False for a router whose choice
    ignores load (round-robin): live, its requests then always take the full path and it
    places each one, as the stack says and as the simulator (which has no fast path) runs it."""

    @classmethod
    def build(cls, params: dict[str, Any] | None = None) -> Router:
        """A fresh router from its parameters; a router without parameters refuses any."""
        if cls.params_model is None:
            if params:
                raise ValueError(f"router '{cls.name}' takes no params, got {sorted(params)}")
            return cls()
        return cls(cls.params_model.model_validate(params or {}))  # type: ignore[call-arg]

    @abstractmethod
    def choose(
        self, request: Request, eligible: Sequence[InstanceView], now_s: float
    ) -> InstanceView:
        """`eligible` is non-empty and every member serves request.model."""
