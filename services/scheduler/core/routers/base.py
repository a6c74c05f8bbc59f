"""Router interface: pick one instance among those that serve the request's model."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from services.scheduler.core.cluster_view import InstanceHandle
from shared.domain import Request


class Router(ABC):
    name: ClassVar[str]

    @abstractmethod
    def choose(
        self, request: Request, eligible: Sequence[InstanceHandle], now_s: float
    ) -> InstanceHandle:
        """`eligible` is non-empty and every member serves request.model."""
