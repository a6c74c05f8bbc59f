"""The engine interface every replica runs behind: the simulated engine and vLLM (vllm/).

Shaped after vLLM 0.32's `AsyncLLM`: `generate` returns an async stream of outputs per request,
`abort` cancels by id, and a request carries a priority. `evict`/`resume` are QLM's eviction LSO
(vLLM realises them as abort-and-resubmit or through its scheduler_cls hook).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Literal, Protocol

from shared.domain import Request
from shared.domain.engine import EngineStatus

FinishReason = Literal["stop", "length", "abort"]


@dataclass(frozen=True, slots=True)
class EngineRequest:
    """A request as an engine receives it: control-plane metadata plus the prompt payload.

    The simulated engine reads only `request`; vLLM reads `prompt` or `prompt_token_ids`.
    """

    request: Request
    prompt: str | None = None
    prompt_token_ids: list[int] | None = field(default=None)


@dataclass(frozen=True, slots=True)
class TokenChunk:
    """New output of one request since its previous chunk (vLLM's RequestOutput, in DELTA mode).

    num_output_tokens is cumulative; time_s is on the engine's clock.
    """

    request_id: str
    token_ids: list[int]
    text: str
    num_output_tokens: int
    time_s: float
    finished: bool = False
    finish_reason: FinishReason | None = None
    prompt_token_ids: tuple[int, ...] | None = None
    """On a last chunk, from engines with token ids (vLLM): the ids this call prefilled (the
    prompt, or a resumed slice's context), so a slice can be resumed elsewhere."""


def coalesce(chunks: list[TokenChunk]) -> TokenChunk:
    """Consecutive chunks of one request as one: their tokens and text in order, the latest
    count, time and finish. A stream whose consumer fell behind sends what is ready as one
    message (one per consumer wake-up rather than one per engine step)."""
    if len(chunks) == 1:
        return chunks[0]
    last = chunks[-1]
    return TokenChunk(
        request_id=last.request_id,
        token_ids=[t for c in chunks for t in c.token_ids],
        text="".join(c.text for c in chunks),
        num_output_tokens=last.num_output_tokens,
        time_s=last.time_s,
        finished=last.finished,
        finish_reason=last.finish_reason,
        prompt_token_ids=last.prompt_token_ids,
    )


class Engine(Protocol):
    def generate(self, request: EngineRequest) -> AsyncIterator[TokenChunk]:
        """Stream the request's output; closing the stream early aborts the request."""
        ...

    async def abort(self, request_id: str) -> None: ...

    async def evict(self, request_ids: list[str]) -> list[str]:
        """Take running/queued requests out of service; returns those evicted."""
        ...

    async def resume(self, request_ids: list[str]) -> list[str]:
        """Queue evicted requests again; returns those resumed."""
        ...

    def status(self) -> EngineStatus: ...

    async def shutdown(self) -> None: ...
