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
