"""Defence in depth: a replica enforces the same request limits as the ingress.

The ingress validates every client request, but a replica must not trust that everything
reaching it came through the ingress (a misconfigured credential, a future internal caller).
Each Generate is checked against these limits before it reaches the engine; a violation is
INVALID_ARGUMENT naming the field and the rule.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ReplicaLimits(BaseModel):
    """Limits a replica enforces on every Generate (defaults mirror the ingress's)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_tokens: int = Field(8192, ge=1)
    """Largest max_tokens a request may ask for."""
    min_priority: int = -1000
    """Lowest priority a request may carry (lower is served first)."""
    max_priority: int = 1000
    """Highest priority a request may carry."""
    max_prompt_bytes: int = Field(4 << 20, ge=1)
    """Largest prompt, UTF-8 bytes."""


class LimitExceeded(ValueError):
    """A request broke one of the replica's limits; the message names the field and rule."""


def check_limits(limits: ReplicaLimits, max_tokens: int, priority: int, prompt: str) -> None:
    """Raise LimitExceeded for the first limit the request breaks."""
    if not 1 <= max_tokens <= limits.max_tokens:
        raise LimitExceeded(
            f"meta.max_tokens must be between 1 and {limits.max_tokens}, got {max_tokens}"
        )
    if not limits.min_priority <= priority <= limits.max_priority:
        raise LimitExceeded(
            f"meta.priority must be between {limits.min_priority} and {limits.max_priority}, "
            f"got {priority}"
        )
    size = len(prompt.encode("utf-8", "surrogatepass"))
    if size > limits.max_prompt_bytes:
        raise LimitExceeded(f"prompt must be at most {limits.max_prompt_bytes} bytes, got {size}")
