"""VLLMEngine with `engine_stats` off, on the real vLLM CPU engine and the tiny model: the engine
core runs without scheduler statistics (as `vllm serve --disable-log-stats`), and the replica
counts the KV blocks of its live requests' contexts itself."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.replica.engine import EngineRequest
from tests.vllm.conftest import tiny_engine

pytest.importorskip("vllm")


@pytest.fixture(scope="module")
def engine(tiny_model_dir: Path, arun: Any) -> Iterator[Any]:
    yield from tiny_engine(tiny_model_dir, arun, engine_stats=False)


def test_no_statistics_and_kv_use_counted_from_the_live_contexts(
    engine: Any, arun: Any, make_request: Any
) -> None:
    assert engine._llm.log_stats is False  # the engine core was started without statistics
    block = engine._block_tokens

    async def scenario() -> tuple[int, int, int]:
        request = make_request("kv", 200, arrival_s=engine.clock.now())
        stream = engine.generate(EngineRequest(request, "Hello world, count my blocks"))
        chunk = await stream.__anext__()
        while chunk.num_output_tokens < 3:
            chunk = await stream.__anext__()
        used = engine.status().kv_used_blocks
        live = next(iter(engine._streams.values()))
        context = engine._context_len(live)
        await stream.aclose()
        return used, context, engine.status().kv_used_blocks

    used, context, after = arun(scenario())
    assert engine.stats.latest is None  # nothing reported by the engine core
    assert used == -(-context // block) and used >= 1
    assert after == 0  # the closed stream holds nothing
