"""A model swap on real vLLM (CPU build): the replica's model host with the restart loader.

The swap shuts the active engine down and starts one for the other model. vLLM's shutdown
blocks while it waits for the engine-core process to exit; the replica's event loop must keep
running meanwhile (its streams and its Status answers), so the shutdown runs off the loop.
The shutdown is watched by a wrapper around the AsyncLLM's own `shutdown`: it records the thread
it was called on and, from there, asks the loop to run a callback and waits for it, which only
happens while the loop is free. Both models are the tiny random-weight checkpoint under two
served names (a swap is an engine restart whatever the weights).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from services.replica.engine import EngineRequest
from shared.domain import Request

pytest.importorskip("vllm")

PROMPT = "Hello world, the model serves a request"
MODELS = ["tiny-a", "tiny-b"]


class ShutdownWatch:
    """Wraps an AsyncLLM's `shutdown`: where it ran, and whether the loop ran a callback then."""

    def __init__(self, llm: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.loop_thread = threading.get_ident()
        self.calls: list[tuple[bool, bool]] = []
        """(called on the loop's thread, the loop ran a callback during the call) per call."""
        real = llm.shutdown

        def shutdown(*args: Any, **kwargs: Any) -> None:
            on_loop = threading.get_ident() == self.loop_thread
            ran = threading.Event()
            if not on_loop:  # the loop is free only if the call is not holding it
                loop.call_soon_threadsafe(ran.set)
                ran.wait(60)
            real(*args, **kwargs)
            self.calls.append((on_loop, ran.is_set()))

        llm.shutdown = shutdown


async def _serve(host: Any, model: str, request: Request) -> int:
    """One request on `model` through the host; the output tokens it streamed."""
    tokens = 0
    async with host.use(model) as loaded:
        async for chunk in loaded.engine.generate(EngineRequest(request, PROMPT)):
            tokens = chunk.num_output_tokens
    return tokens


def test_swap_restarts_vllm_off_the_event_loop(
    tiny_model_dir: Path, arun: Any, make_request: Callable[..., Request]
) -> None:
    from services.replica.model_swap import model_host
    from services.replica.vllm.config import VLLMEngineConfig
    from services.replica.vllm.engine import VLLMEngine
    from services.replica.vllm.openai_app import ServingOptions

    def build(model: str) -> VLLMEngine:
        return VLLMEngine(
            VLLMEngineConfig(
                model=str(tiny_model_dir),
                served_model_name=model,
                max_model_len=512,
                max_num_seqs=2,
                kv_cache_memory_bytes=32 << 20,
            )
        )

    host = model_host(MODELS, "vllm", build, dict.fromkeys(MODELS, ServingOptions()))

    async def run() -> tuple[int, int, list[tuple[bool, bool]]]:
        loaded = await host.start()
        assert loaded is not None
        watch = ShutdownWatch(loaded.engine.llm, asyncio.get_running_loop())
        first = await _serve(host, "tiny-a", make_request("a-1", 6))
        second = await _serve(host, "tiny-b", make_request("b-1", 6))  # swaps first
        return first, second, watch.calls

    try:
        first, second, calls = arun(run(), timeout_s=600)
        assert (first, second) == (6, 6)
        assert host.active == "tiny-b"
        assert [(s.from_model, s.to_model, s.ok) for s in host.swaps] == [
            ("tiny-a", "tiny-b", True)
        ]
        assert calls == [(False, True)]  # off the loop's thread, the loop free meanwhile
        assert host.failed_requests == 0
    finally:
        serving = arun(host.start(), timeout_s=60)  # the active model's engine
        if serving is not None:
            arun(serving.engine.shutdown(), timeout_s=120)
