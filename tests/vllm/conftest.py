"""Fixtures for the real-vLLM tests: the tiny model (built once per session) and request helpers.

The tests skip where vLLM is not installed. Engines live on one module-scoped event loop (an
AsyncLLM is bound to the loop it was created on); tests drive it through the `arun` fixture.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from shared.domain import SLO, Request

T = TypeVar("T")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from services.replica.vllm.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("models") / "tiny-llama")


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()


class Runner:
    """Runs coroutines to completion on the module's loop, failing after a timeout."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def __call__(self, coro: Coroutine[Any, Any, T], timeout_s: float = 60) -> T:
        return self.loop.run_until_complete(asyncio.wait_for(coro, timeout_s))


@pytest.fixture(scope="module")
def arun(loop: asyncio.AbstractEventLoop) -> Runner:
    return Runner(loop)


def tiny_engine(model_dir: Path, arun: Runner, **settings: Any) -> Iterator[Any]:
    """A VLLMEngine on the tiny model with the tests' common settings (`settings` over them),
    started on the module's loop; shut down when the generator resumes (a fixture's
    `yield from`)."""
    from services.replica.vllm.config import VLLMEngineConfig
    from services.replica.vllm.engine import VLLMEngine

    common: dict[str, Any] = {
        "model": str(model_dir),
        "served_model_name": "tiny",
        "max_model_len": 512,
        "max_num_seqs": 2,
        "kv_cache_memory_bytes": 32 << 20,
    }
    config = VLLMEngineConfig(**{**common, **settings})

    async def start() -> VLLMEngine:
        return VLLMEngine(config)

    engine = arun(start(), timeout_s=240)
    yield engine
    arun(engine.shutdown())


@pytest.fixture(scope="session")
def make_request() -> Callable[..., Request]:
    """A factory of control-plane requests for the tiny model."""

    def make(
        rid: str,
        max_tokens: int,
        *,
        arrival_s: float = 0.0,
        ttft_deadline_s: float = 60.0,
        priority: int = 0,
    ) -> Request:
        return Request(
            request_id=rid,
            model="tiny",
            input_tokens=8,
            max_tokens=max_tokens,
            arrival_s=arrival_s,
            slo=SLO(ttft_deadline_s=ttft_deadline_s),
            priority=priority,
        )

    return make
