"""`VLLMEngine`: the replica `Engine` interface over vLLM 0.32's `AsyncLLM`.

Each `generate` stream is fed by a pump task that iterates `AsyncLLM.generate` (DELTA outputs) and
turns every `RequestOutput` into a `TokenChunk`. Cancelling the pump cancels vLLM's generator,
which aborts the request inside vLLM; that is how early stream closing, `abort` and `evict` free
the engine.

Eviction: vLLM has no evict API, so `evict` is abort-and-remember. The engine keeps the request,
its prompt token ids and the tokens streamed so far; `resume` resubmits prompt + generated tokens
(as token ids, so nothing is re-tokenised) with the remaining max_tokens, under a fresh vLLM
request id, and the new tokens continue on the same consumer stream with cumulative counts.
Prefix caching makes the re-prefill cheap while the evicted blocks are still cached.

Construct it inside the event loop that will use it (Ray Serve deployments are async): AsyncLLM
binds its output handler to that loop. The constructor blocks while vLLM starts; vLLM always runs
its engine core (scheduler + model, with multiprocessing=False) in a spawned process that
re-imports vLLM, so even the tiny model takes ~20 s on 2 CPU cores, plus ~15 s for the first
`import vllm` in the calling process.

`status()` counts waiting/running from the engine's own bookkeeping (a request is running once
its current submission has produced a token) and KV blocks from vLLM's latest scheduler stats.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from services.replica.engine import (
    Engine,
    EngineRequest,
    FinishReason,
    TokenChunk,
    coalesce,
)
from services.replica.vllm.config import VLLMEngineConfig
from services.replica.vllm.slo_metadata import ASYNC_SCHEDULER_CLS, request_metadata
from shared.domain import Clock, WallClock
from shared.domain.engine import EngineStatus
from shared.domain.engine_metadata import EXTRA_ARGS_KEY

if TYPE_CHECKING:
    from vllm.v1.engine.async_llm import AsyncLLM

_log = logging.getLogger(__name__)

_REASONS: dict[str, FinishReason] = {"stop": "stop", "length": "length", "abort": "abort"}


class InvalidRequestError(ValueError):
    """vLLM rejected the request (e.g. the prompt exceeds max_model_len): a client error."""


@dataclass(eq=False)
class _Stream:
    """One request's state across (re)submissions to vLLM."""

    request: EngineRequest
    queue: asyncio.Queue[TokenChunk | BaseException] = field(default_factory=asyncio.Queue)
    prompt_token_ids: list[int] | None = None
    token_ids: list[int] = field(default_factory=list)
    text: str = ""
    attempt: int = 0
    attempt_tokens: int = 0  # tokens received since the latest (re)submission
    vllm_id: str = ""
    task: asyncio.Task[None] | None = None
    done: bool = False

    @property
    def request_id(self) -> str:
        return self.request.request.request_id

    @property
    def remaining_tokens(self) -> int:
        # max_tokens, or a forced output length (true_output_tokens) when it is shorter
        return self.request.request.output_tokens_to_generate - len(self.token_ids)


class VLLMEngine:
    """A real vLLM engine behind slomesh's Engine protocol (see the module docstring)."""

    def __init__(self, config: VLLMEngineConfig, clock: Clock | None = None) -> None:
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "1" if config.multiprocessing else "0"
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.usage.usage_lib import UsageContext
        from vllm.v1.engine.async_llm import AsyncLLM

        from services.replica.vllm.stats import LatestSchedulerStats, scheduler_stats_only

        self.config = config
        self.clock: Clock = clock if clock is not None else WallClock()
        args = AsyncEngineArgs(**config.engine_args_kwargs(), disable_log_stats=True)
        vllm_config = args.create_engine_config(UsageContext.ENGINE_CONTEXT)
        if config.uses_scheduler_hook and vllm_config.scheduler_config.async_scheduling:
            vllm_config.scheduler_config.scheduler_cls = ASYNC_SCHEDULER_CLS
        self.stats = LatestSchedulerStats()
        # disable_log_stats with a custom stat logger: stats on, vLLM's periodic log lines off;
        # then the front end's own statistics off again, the scheduler stats kept (stats.py)
        self._llm: AsyncLLM | None = AsyncLLM.from_vllm_config(
            vllm_config,
            stat_loggers=[self.stats] if config.engine_stats else None,
            disable_log_stats=True,
        )
        scheduler_stats_only(self._llm)  # nothing is added yet: always True here
        from services.replica.vllm.cpu_priority import vllm_engine_pids

        engine_pids = vllm_engine_pids(self._llm)
        if config.engine_nice is not None:
            from services.replica.vllm.cpu_priority import prioritize_engine

            done = prioritize_engine(config.engine_nice, known=engine_pids)
            _log.log(logging.INFO if done.set_all else logging.WARNING, done.describe())
        if config.mesh_sched_policy is not None or config.engine_cpus is not None:
            from services.replica.vllm.cpu_placement import place_mesh_now_and_later

            place_mesh_now_and_later(
                config.mesh_sched_policy,
                config.engine_cpus,
                _log,
                config.engine_helpers,
                engine_pids,
                config.engine_realtime,
            )
        self._kv_total_blocks = int(vllm_config.cache_config.num_gpu_blocks or 0)
        self._block_tokens = int(vllm_config.cache_config.block_size)
        self._streams: dict[str, _Stream] = {}
        self._evicted: dict[str, _Stream] = {}
        self._closed = False

    # ---- Engine protocol ---------------------------------------------------------------------
    async def generate(self, request: EngineRequest) -> AsyncIterator[TokenChunk]:
        rid = request.request.request_id
        if self._closed:
            raise RuntimeError("engine is shut down")
        if rid in self._streams:
            raise ValueError(f"request_id '{rid}' already in this engine")
        if request.prompt is None and request.prompt_token_ids is None:
            raise ValueError(f"request '{rid}': a vLLM engine needs prompt or prompt_token_ids")
        stream = _Stream(request, prompt_token_ids=request.prompt_token_ids)
        self._streams[rid] = stream
        finished = False
        try:
            self._submit(stream)
            while not finished:
                # what is ready goes out as one chunk (coalesced per wake-up), an error after it
                ready: list[TokenChunk] = []
                failure: BaseException | None = None
                item = await stream.queue.get()
                while True:
                    if isinstance(item, BaseException):
                        failure = item
                        break
                    ready.append(item)
                    if stream.queue.empty():
                        break
                    item = stream.queue.get_nowait()
                if ready:
                    chunk = coalesce(ready)
                    finished = chunk.finished
                    yield chunk
                if failure is not None:
                    raise failure
        finally:
            self._streams.pop(rid, None)
            self._evicted.pop(rid, None)
            if not finished:  # the consumer went away (or vLLM failed): free vLLM's resources
                await self._stop(stream)

    async def abort(self, request_id: str) -> None:
        stream = self._streams.get(request_id)
        if stream is None or stream.done:
            return
        self._evicted.pop(request_id, None)
        await self._stop(stream)
        if not stream.done:  # else it finished on its own meanwhile and sent its final chunk
            stream.done = True
            self._emit(stream, [], "", finished=True, reason="abort")

    async def evict(self, request_ids: list[str]) -> list[str]:
        """Abort the requests in vLLM but remember them for `resume` (see module docstring)."""
        evicted = []
        for rid in request_ids:
            stream = self._streams.get(rid)
            if stream is None or stream.done or rid in self._evicted:
                continue
            await self._stop(stream)
            if stream.done:  # it finished before the cancellation landed
                continue
            self._evicted[rid] = stream
            evicted.append(rid)
        return evicted

    async def resume(self, request_ids: list[str]) -> list[str]:
        resumed = []
        for rid in request_ids:
            stream = self._evicted.pop(rid, None)
            if stream is not None:
                self._submit(stream)
                resumed.append(rid)
        return resumed

    def status(self) -> EngineStatus:
        evicted = self._evicted
        live = [s for s in self._streams.values() if not s.done and s.request_id not in evicted]
        waiting = [s for s in live if s.attempt_tokens == 0]
        total = self._kv_total_blocks
        used = self._kv_used_blocks(live)
        pending = sum(self._context_len(s) for s in waiting) + (len(live) - len(waiting))
        outstanding = sum(s.remaining_tokens for s in [*live, *evicted.values()])
        return EngineStatus(
            active_model=self.config.active_model,
            waiting=len(waiting),
            running=len(live) - len(waiting),
            evicted=len(evicted),
            kv_used_blocks=used,
            kv_total_blocks=total,
            outstanding_output_tokens=outstanding,
            pending_prefill_tokens=pending,
        )

    async def shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        for rid in list(self._streams):
            await self.abort(rid)  # consumers still waiting get a final "abort" chunk
        llm, self._llm = self._llm, None
        if llm is not None:
            # shut down now and drop the last reference, so AsyncLLM.__del__ does not run again
            # at interpreter exit (where it fails on torn-down module globals). vLLM's shutdown
            # blocks while it waits for the engine-core process to exit (seconds): it runs in a
            # worker thread, so the event loop keeps serving streams and Status meanwhile (vLLM
            # hands the sockets and tasks it closes back to their loop thread-safely)
            await asyncio.to_thread(llm.shutdown)

    @property
    def kv_total_blocks(self) -> int:
        """KV-cache blocks of this engine."""
        return self._kv_total_blocks

    @property
    def llm(self) -> AsyncLLM:
        """vLLM's AsyncLLM behind this engine (RuntimeError after shutdown)."""
        if self._llm is None:
            raise RuntimeError("engine is shut down")
        return self._llm

    # ---- introspection -----------------------------------------------------------------------
    def num_unfinished_vllm_requests(self) -> int:
        """Requests vLLM's front end still tracks (0 once every stream finished or was freed)."""
        processor = self.llm.output_processor
        return int(processor.get_num_unfinished_requests())  # type: ignore[no-untyped-call]

    # ---- internals ---------------------------------------------------------------------------
    def _kv_used_blocks(self, live: list[_Stream]) -> int:
        """The engine's KV-cache use: from its latest statistics when it reports them, else the
        blocks of the live requests' contexts (`engine_stats` off)."""
        if not live:
            return 0
        snap = self.stats.latest
        if self.config.engine_stats and snap is not None:
            return round(snap.kv_cache_usage * self._kv_total_blocks)
        b = max(self._block_tokens, 1)
        return min(sum(-(-self._context_len(s) // b) for s in live), self._kv_total_blocks)

    def _context_len(self, stream: _Stream) -> int:
        prompt = stream.prompt_token_ids
        base = len(prompt) if prompt is not None else stream.request.request.input_tokens
        return base + len(stream.token_ids)

    def _submit(self, stream: _Stream) -> None:
        """(Re)submit the stream's request to vLLM, continuing from the tokens it already has."""
        from vllm.sampling_params import RequestOutputKind, SamplingParams

        stream.attempt += 1
        stream.attempt_tokens = 0
        stream.vllm_id = (
            stream.request_id if stream.attempt == 1 else f"{stream.request_id}#{stream.attempt}"
        )
        req = stream.request
        prompt: dict[str, Any]
        if stream.token_ids or (stream.prompt_token_ids is not None and req.prompt is None):
            assert stream.prompt_token_ids is not None
            prompt = {"prompt_token_ids": [*stream.prompt_token_ids, *stream.token_ids]}
        else:
            prompt = {"prompt": req.prompt}
        meta = request_metadata(req.request, self.clock, first_token_emitted=bool(stream.token_ids))
        params = SamplingParams(
            max_tokens=stream.remaining_tokens,
            # a forced output length (the caller's ignore_eos) runs to max_tokens past EOS
            ignore_eos=req.request.true_output_tokens is not None,
            temperature=self.config.temperature,
            output_kind=RequestOutputKind.DELTA,
            extra_args={EXTRA_ARGS_KEY: meta},
        )
        priority = req.request.priority if self.config.uses_scheduler_hook else 0
        stream.task = asyncio.get_running_loop().create_task(
            self._pump(stream, prompt, params, priority), name=f"vllm-pump-{stream.vllm_id}"
        )

    async def _pump(self, stream: _Stream, prompt: Any, params: Any, priority: int) -> None:
        try:
            async for out in self.llm.generate(prompt, params, stream.vllm_id, priority=priority):
                if stream.prompt_token_ids is None and out.prompt_token_ids is not None:
                    stream.prompt_token_ids = list(out.prompt_token_ids)
                comp = out.outputs[0] if out.outputs else None
                new_ids = list(comp.token_ids) if comp is not None else []
                text = comp.text if comp is not None else ""
                stream.token_ids.extend(new_ids)
                stream.text += text
                stream.attempt_tokens += len(new_ids)
                reason: FinishReason | None = None
                if out.finished:
                    raw = comp.finish_reason if comp is not None else None
                    reason = _REASONS.get(str(raw), "stop")
                    stream.done = True
                self._emit(stream, new_ids, text, out.finished, reason)
                if out.finished:
                    return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # validation errors, a dead engine: surface them to the consumer
            from vllm.exceptions import VLLMClientError

            stream.done = True
            if isinstance(exc, VLLMClientError):
                invalid = InvalidRequestError(str(exc))
                invalid.__cause__ = exc
                stream.queue.put_nowait(invalid)
            else:
                stream.queue.put_nowait(exc)

    async def _stop(self, stream: _Stream) -> None:
        """Cancel the pump; vLLM's generator aborts the request on cancellation."""
        task = stream.task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task})
        if not stream.done:
            # a cancellation that lands while vLLM is still adding the request finds no handle
            # to abort inside vLLM's generator: abort by id as well (a no-op when already gone)
            await self.llm.abort(stream.vllm_id)

    def _emit(
        self,
        stream: _Stream,
        token_ids: list[int],
        text: str,
        finished: bool,
        reason: FinishReason | None,
    ) -> None:
        stream.queue.put_nowait(
            TokenChunk(
                request_id=stream.request_id,
                token_ids=token_ids,
                text=text,
                num_output_tokens=len(stream.token_ids),
                time_s=self.clock.now(),
                finished=finished,
                finish_reason=reason if finished else None,
                prompt_token_ids=(
                    tuple(stream.prompt_token_ids)
                    if finished and stream.prompt_token_ids is not None
                    else None
                ),
            )
        )


def as_engine(engine: VLLMEngine) -> Engine:
    """`VLLMEngine` satisfies the `Engine` protocol (checked statically by mypy)."""
    return engine
