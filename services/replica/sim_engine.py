"""The simulated engine behind the `Engine` interface, on any Clock.

A background task steps the pure `SimEngineCore` (with the planner its EngineConfig asks for,
services/replica/core/planner_factory.py): schedule, sleep the step's profiled duration on
the injected clock (wall time in the live mesh; instant under a VirtualClock in tests), update,
then fan new tokens out to each request's stream. Requests added mid-step join the next step.
"""

from __future__ import annotations

import asyncio
import contextlib
import zlib
from collections.abc import AsyncIterator

from services.replica.core.engine_core import SimEngineCore
from services.replica.core.outputs import StepKind
from services.replica.core.planner_factory import make_planner
from services.replica.engine import EngineRequest, FinishReason, TokenChunk
from shared.domain import Clock, HardwareProfile
from shared.domain.engine import EngineConfig, EngineStatus

_VOCAB = 32000


class AsyncSimEngine:
    def __init__(
        self,
        name: str,
        profiles: dict[str, HardwareProfile],
        config: EngineConfig,
        clock: Clock,
        active_model: str | None = None,
    ) -> None:
        planner = make_planner(config, profiles)
        self.core = SimEngineCore(name, profiles, config, planner, active_model)
        self.clock = clock
        self._streams: dict[str, asyncio.Queue[TokenChunk]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    async def generate(self, request: EngineRequest) -> AsyncIterator[TokenChunk]:
        rid = request.request.request_id
        queue: asyncio.Queue[TokenChunk] = asyncio.Queue()
        self.core.add_request(request.request, self.clock.now())
        self._streams[rid] = queue
        self._ensure_loop()
        self._wake.set()
        finished = False
        try:
            while not finished:
                chunk = _coalesce(await queue.get(), queue)
                finished = chunk.finished
                yield chunk
        finally:
            self._streams.pop(rid, None)
            if not finished:  # the consumer went away: free the engine's resources
                self.core.abort(rid)

    async def abort(self, request_id: str) -> None:
        seq = self.core.sequence(request_id)
        produced = seq.num_output_tokens if seq is not None else 0
        if self.core.abort(request_id):
            self._send(request_id, [], produced, finished=True, reason="abort")

    async def evict(self, request_ids: list[str]) -> list[str]:
        return self.core.evict(request_ids)

    async def resume(self, request_ids: list[str]) -> list[str]:
        done = self.core.resume(request_ids, self.clock.now())
        self._wake.set()
        return done

    def status(self) -> EngineStatus:
        return self.core.status()

    async def shutdown(self) -> None:
        self._closed = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _ensure_loop(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while not self._closed:
            plan = self.core.schedule(self.clock.now())
            if plan.kind is StepKind.IDLE:
                self._wake.clear()
                await self._wake.wait()
                continue
            await self.clock.sleep(plan.duration_s)
            result = self.core.update(plan)
            done = {id(s) for s in result.finished}
            for seq in result.emitted:
                finished = id(seq) in done
                reason: FinishReason = (
                    "length" if seq.num_output_tokens >= seq.request.max_tokens else "stop"
                )
                # synthetic but deterministic token ids (the simulator models timing, not text)
                token = (zlib.crc32(seq.request_id.encode()) + seq.num_output_tokens) % _VOCAB
                self._send(seq.request_id, [token], seq.num_output_tokens, finished, reason)

    def _send(
        self, rid: str, tokens: list[int], n: int, finished: bool, reason: FinishReason
    ) -> None:
        queue = self._streams.get(rid)
        if queue is not None:
            fr = reason if finished else None
            queue.put_nowait(TokenChunk(rid, tokens, "", n, self.clock.now(), finished, fr))


def _coalesce(chunk: TokenChunk, queue: asyncio.Queue[TokenChunk]) -> TokenChunk:
    """Merge chunks already waiting behind `chunk` (a consumer that lags gets one delta with all
    new tokens, as vLLM's DELTA output kind does), so slow consumers cost fewer messages."""
    while not chunk.finished and not queue.empty():
        nxt = queue.get_nowait()
        chunk = TokenChunk(
            chunk.request_id,
            chunk.token_ids + nxt.token_ids,
            chunk.text + nxt.text,
            nxt.num_output_tokens,
            nxt.time_s,
            nxt.finished,
            nxt.finish_reason,
        )
    return chunk
