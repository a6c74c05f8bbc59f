"""A request's wait for its model on a replica with several models, with heartbeats.

On a replica that serves several models (model_host.py), a request for a model other than the
active one waits in the host's line until the swaps ahead of it are done: on a CPU replica each
swap is an engine restart of tens of seconds, so a request behind two or three of them waits a
minute or more before its first byte, well within a batch class's TTFT SLO. The caller reads a
stream that stays silent that long as a hung replica (its idle timeout, MeshClient's
`stream_idle_timeout_s`, the ingress's `replica_idle_timeout_s`) and fails an accepted request.
So while the request waits for its turn, the replica sends an empty message every `heartbeat_s`,
as it does while vLLM holds a request queued (response_pieces.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import Generic, TypeVar

from services.replica.model_host import ModelHost

S = TypeVar("S")

HEARTBEAT_S = 5.0
"""Seconds between two heartbeats while a request waits for its model (the response's own
heartbeat interval, openai_serving.OpenAIServing.heartbeat_s)."""


class ModelTurn(Generic[S]):
    """Enters `host.use(model)` on `stack` (held until the stack closes); `wait()` yields once
    per `heartbeat_s` while the request waits, then `serving` is the model's serving."""

    def __init__(
        self,
        host: ModelHost[S],
        model: str,
        stack: contextlib.AsyncExitStack,
        heartbeat_s: float = HEARTBEAT_S,
        deadline_s: float = 0.0,
    ) -> None:
        self.host = host
        self.model = model
        self.deadline_s = deadline_s
        """The request's TTFT deadline: its place in a deadline-ordered line (ModelHost.use)."""
        self.stack = stack
        self.heartbeat_s = heartbeat_s
        self._serving: S | None = None

    async def wait(self) -> AsyncGenerator[None, None]:
        """Yields a heartbeat each `heartbeat_s` until the model is active for this request;
        a failed swap (SwapFailed) is raised; closing the iterator leaves the line."""
        entering = asyncio.ensure_future(
            self.stack.enter_async_context(self.host.use(self.model, self.deadline_s))
        )
        try:
            while True:
                done, _ = await asyncio.wait({entering}, timeout=self.heartbeat_s)
                if done:
                    break
                yield None
        except BaseException:  # the caller left (closed or cancelled) while the request waited
            entering.cancel()
            await asyncio.gather(entering, return_exceptions=True)
            raise
        self._serving = entering.result()

    @property
    def serving(self) -> S:
        """The model's serving, once `wait()` is done."""
        if self._serving is None:
            raise RuntimeError("ModelTurn.serving: wait() has not finished")
        return self._serving
