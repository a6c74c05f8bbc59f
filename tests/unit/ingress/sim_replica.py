"""A real replica's OpenAI serving in the test process: `simulated_serving` (vLLM's own OpenAI
application over vLLM's AsyncLLM front end on a simulated engine), with the tiny model's
tokenizer, running on an event loop of its own thread so one instance serves every test of a
module whatever loop the test (or TestClient) runs on. `serve` bridges its chunk stream to the
caller's loop; closing it early closes the replica's stream (the engine aborts the request)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import AsyncIterator, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from shared.domain import Request
from shared.rpc.slomesh.v1 import replica_pb2

T = TypeVar("T")
_END = object()


class SimReplica:
    def __init__(self, loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
        self.loop = loop
        self.thread = thread
        self.serving: Any = None
        self.model_dir: Path | None = None
        """The tiny model's directory (its tokenizer and chat template)."""

    @classmethod
    def start(
        cls, model_dir: Path, served: str, max_model_len: int, adapters: Any = None
    ) -> SimReplica:
        """Build the tiny model in `model_dir` and serve it as `served` (with `adapters`, a
        ReplicaAdapters, its LoRA adapters)."""
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="sim-replica", daemon=True)
        thread.start()
        replica = cls(loop, thread)
        try:
            replica.model_dir = model_dir
            replica.serving = replica.run(_build(model_dir, served, max_model_len, adapters))
        except BaseException:
            replica.stop()
            raise
        return replica

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float = 300.0) -> T:
        """Run `coro` on the replica's loop and wait for its result (from another thread)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    async def serve(
        self, request: Request, http: replica_pb2.HttpCall
    ) -> AsyncIterator[replica_pb2.ReplicaChunk]:
        """`OpenAIServing.serve` on the replica's loop (one task iterates it, as the replica's
        Generate does), its chunks on the caller's loop."""
        caller = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()

        def put(item: Any) -> None:
            caller.call_soon_threadsafe(queue.put_nowait, item)

        async def pump() -> None:
            try:
                async for chunk in self.serving.serve(request, http):
                    put(chunk)
            except BaseException as exc:
                put(exc)
                raise
            finally:
                put(_END)

        task = asyncio.run_coroutine_threadsafe(pump(), self.loop)
        ended = False
        try:
            while True:
                item = await queue.get()
                if item is _END:
                    ended = True
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            if not ended:  # closed early: the replica's stream closes, the engine aborts
                self.loop.call_soon_threadsafe(task.cancel)
                while await queue.get() is not _END:
                    pass

    def stop(self) -> None:
        if self.serving is not None:
            llm = self.serving.client.inner
            self.run(_shutdown(llm))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


async def _shutdown(llm: Any) -> None:
    llm.shutdown()


async def _build(model_dir: Path, served: str, max_model_len: int, adapters: Any) -> Any:
    from services.replica.openai_serving import simulated_serving
    from services.replica.sim_engine import AsyncSimEngine
    from services.replica.vllm.openai_app import ServingOptions
    from services.replica.vllm.tiny_model import build_tiny_model
    from shared.domain import WallClock
    from shared.domain.engine import EngineConfig
    from shared.profiles.defaults import default_profile

    path = build_tiny_model(model_dir)
    profile = dataclasses.replace(default_profile("A100-80GB", "llama-3.1-8b", 1), model=served)
    engine = AsyncSimEngine("r0", {served: profile}, EngineConfig(), WallClock(), served)
    return await simulated_serving(
        engine, served, str(path), max_model_len, ServingOptions(), adapters
    )
