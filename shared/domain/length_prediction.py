"""The length-predictor interface: what the scheduler and the simulator need of any predictor.

Implementations live in the predictor service (online histogram, learned model); the composition
root hands one to the policies that plan on output lengths (QLM, the batch formers).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from shared.domain.length_distribution import LengthDistribution
from shared.domain.request import Request


@runtime_checkable
class LengthPredictor(Protocol):
    """Predicts a request's output-length distribution and learns from finished requests.

    Implementations are pure (no clock, no I/O, no global RNG) and not thread-safe: the shell
    serialises calls. `prompt` is the prompt text where the caller may share it (the ingress
    does, the scheduler never does); implementations must work without it.
    """

    name: str
    """Registry name of the implementation."""

    def predict(self, request: Request, prompt: str | None = None) -> LengthDistribution:
        """Output-length distribution of `request`, capped by request.max_tokens."""
        ...

    def observe(self, request: Request, output_tokens: int) -> None:
        """Learn that `request` produced `output_tokens` tokens."""
        ...

    @property
    def observations(self) -> int:
        """Completions learned from so far (ObserveReply.observations)."""
        ...

    def state(self) -> dict[str, Any]:
        """JSON-able snapshot, restorable with the registry's `restore_predictor`."""
        ...
