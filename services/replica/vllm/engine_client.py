"""`SLOEngineClient`: vLLM's `EngineClient` as vLLM's OpenAI serving classes see it, with slomesh
between them and the engine.

It wraps an `AsyncLLM` (the real engine, or the simulated one of sim_llm.py) and passes every
call through, except `generate`:
- slomesh's metadata of the request being served (set by the replica in `SERVING`, a context
  variable the application's tasks inherit, so the client's body reaches vLLM byte for byte)
  is put in `SamplingParams.extra_args["slomesh"]`, vLLM's own channel to the engine core, where
  the scheduler hook (scheduler_hook.py) and the simulated engine read it;
- the engine priority is slomesh's, computed once at the ingress (band, then SLO class, then the
  body's `priority` with vLLM's meaning as the tie-break: services/ingress/core/tenancy.py);
  the body's priority that vLLM's serving classes pass on is replaced by it;
- every request is followed under its slomesh id: output tokens (all choices), first-token
  time, finish reason and prompt tokens, which the replica reports to the control plane, and
  the counts behind `status()`;
- each request's `stream_interval` (vLLM's tokens per output) is set from the replica's message
  interval and the time per token measured over the outputs seen here (output_pace.py), so
  vLLM's front end does its per-output work once per message's worth of tokens.

vLLM's serving classes stay unaware of slomesh: they build the sampling parameters, render the
prompt and format the output; nothing of the request is rebuilt here.
"""

from __future__ import annotations

import contextvars
import math
import time
from collections.abc import AsyncGenerator, Iterator
from dataclasses import dataclass
from typing import Any

from services.replica.vllm.output_pace import OutputPace
from shared.domain.engine import EngineStatus
from shared.domain.engine_metadata import EXTRA_ARGS_KEY


@dataclass
class Followed:
    """What the replica reports of one request (all its engine calls together)."""

    request_id: str
    prompt_tokens: int = 0
    output_tokens: int = 0
    first_token_s: float = 0.0
    finish_reason: str = ""
    running: bool = False
    calls: int = 0
    ttft_deadline_unix_s: float = math.inf
    """When its first token is due (from slomesh's metadata; inf: no deadline known)."""
    last_output_s: float = 0.0
    """Monotonic time of its latest output with tokens (0: none yet)."""


SERVING: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "slomesh_serving", default=None
)
"""slomesh's engine metadata (shared/domain/engine_metadata.py) of the request the current task
serves: set by the replica around its call of the application."""


class SLOEngineClient:
    """vLLM's EngineClient with slomesh in the middle (module docstring)."""

    def __init__(
        self,
        inner: Any,
        kv_total_blocks: int = 0,
        stats: Any = None,
        deadline_ordered: bool = False,
        list_waiting: bool = False,
    ) -> None:
        self.inner = inner
        self.deadline_ordered = deadline_ordered
        """The engine's queue serves waiting requests earliest TTFT deadline first."""
        self.list_waiting = list_waiting and deadline_ordered
        """The status reports each waiting request's deadline and prompt tokens (only on a
        deadline-ordered queue, for the scheduler's deadline-aware TTFT guard)."""
        self.kv_total_blocks = kv_total_blocks
        self.stats = stats
        """vLLM's latest scheduler stats (vllm/stats.py), for KV use; None: not reported."""
        self._followed: dict[str, Followed] = {}
        self.pace = OutputPace()
        """Tokens per vLLM output for the requests served (`pace.batch_s` 0: one each)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    # ---- the request path --------------------------------------------------------------------
    def follow(self, request_id: str) -> Followed:
        """Start following `request_id` (the replica's Generate, before it calls the app)."""
        followed = self._followed.setdefault(request_id, Followed(request_id))
        return followed

    def release(self, request_id: str) -> Followed | None:
        """Stop following `request_id`: its final counts."""
        return self._followed.pop(request_id, None)

    async def generate(
        self, prompt: Any, sampling_params: Any, request_id: str, **kwargs: Any
    ) -> AsyncGenerator[Any, None]:
        meta = SERVING.get()
        followed: Followed | None = None
        if meta is not None:
            extra = dict(getattr(sampling_params, "extra_args", None) or {})
            extra[EXTRA_ARGS_KEY] = meta
            sampling_params.extra_args = extra
            kwargs["priority"] = int(meta.get("priority", 0))
            followed = self._followed.get(str(meta.get("request_id", "")))
            every = self.pace.tokens_per_output()
            if every > 1 and (getattr(sampling_params, "stream_interval", None) or 1) < every:
                sampling_params.stream_interval = every
        if followed is not None:
            followed.calls += 1
            if meta is not None and meta.get("ttft_deadline_s") is not None:
                due = float(meta["arrival_wall_s"]) + float(meta["ttft_deadline_s"])
                followed.ttft_deadline_unix_s = due
        stream = self.inner.generate(prompt, sampling_params, request_id, **kwargs)
        try:
            async for out in stream:
                if followed is not None:
                    _count(followed, out, self.pace)
                yield out
        finally:
            if followed is not None:
                followed.running = False
            await stream.aclose()

    # ---- what the control plane reads --------------------------------------------------------
    def followed(self) -> Iterator[Followed]:
        return iter(list(self._followed.values()))

    def status(self, active_model: str) -> EngineStatus:
        """Requests waiting (no token yet) and running, KV use from the engine's latest stats."""
        live = list(self._followed.values())
        running = sum(1 for f in live if f.output_tokens > 0 and not f.finish_reason)
        queued = [f for f in live if f.output_tokens == 0 and not f.finish_reason]
        waiting = len(queued)
        snap = self.stats.latest if self.stats is not None else None
        used = round(snap.kv_cache_usage * self.kv_total_blocks) if snap and live else 0
        return EngineStatus(
            active_model=active_model,
            waiting=waiting,
            running=running,
            evicted=0,
            kv_used_blocks=used,
            kv_total_blocks=self.kv_total_blocks,
            outstanding_output_tokens=0,
            pending_prefill_tokens=sum(f.prompt_tokens for f in queued),
            waiting_prefill=(
                tuple((f.ttft_deadline_unix_s, f.prompt_tokens) for f in queued)
                if self.list_waiting
                else ()
            ),
            deadline_ordered=self.deadline_ordered,
        )


def _count(followed: Followed, out: Any, pace: OutputPace | None = None) -> None:
    """Fold one RequestOutput (DELTA or cumulative) into `followed`; the time since its previous
    output over the tokens of this one is a measurement of the time per token (one choice
    only: the outputs of `n` choices come merged)."""
    if not followed.prompt_tokens and out.prompt_token_ids is not None:
        followed.prompt_tokens = len(out.prompt_token_ids)
    # DELTA outputs carry new tokens; FINAL_ONLY/CUMULATIVE carry all of them once
    new = sum(len(c.token_ids) for c in out.outputs)
    if new:
        now = time.monotonic()
        if pace is not None and followed.last_output_s and len(out.outputs) == 1:
            pace.observe(now - followed.last_output_s, new)
        followed.last_output_s = now
    if new and not followed.first_token_s:
        followed.first_token_s = time.time()
    followed.output_tokens += new
    followed.running = True
    if out.finished:
        reasons = [str(c.finish_reason) for c in out.outputs if c.finish_reason]
        last = reasons[-1] if reasons else "stop"
        followed.finish_reason = "length" if "length" in reasons else last
