"""SCORPIO's credit batching inside the real vLLM CPU engine (the scheduler_cls hook).

A tight request (STP 10 ms) and a loose one (STP 30 ms, TRP 1/3) start together with the same
length. Credit batching lets the loose one decode only every third iteration, so when the tight
one has all its tokens the loose one has about a third of them; vLLM alone keeps them level.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.replica.engine import EngineRequest
from shared.domain import SLO, Request
from tests.vllm.conftest import tiny_engine

pytest.importorskip("vllm")

TOKENS = 60


@pytest.fixture(scope="module")
def engine(tiny_model_dir: Path, arun: Any) -> Iterator[Any]:
    from shared.domain.scorpio import ScorpioConfig

    yield from tiny_engine(
        tiny_model_dir,
        arun,
        max_num_seqs=4,
        queue_policy="edf",
        scorpio=ScorpioConfig(ttft_guard=False),
    )


def request(engine: Any, rid: str, tpot_s: float) -> EngineRequest:
    r = Request(
        request_id=rid,
        model="tiny",
        input_tokens=8,
        max_tokens=TOKENS,
        arrival_s=engine.clock.now(),
        slo=SLO(ttft_deadline_s=60.0, tpot_target_s=tpot_s),
    )
    return EngineRequest(r, "Hello world, the model serves a request")


def test_loose_request_decodes_a_third_as_often(engine: Any, arun: Any) -> None:
    async def scenario() -> tuple[int, int]:
        counts = {"tight": 0, "loose": 0}
        at_tight_end: dict[str, int] = {}

        async def consume(rid: str, tpot_s: float) -> None:
            async for chunk in engine.generate(request(engine, rid, tpot_s)):
                counts[rid] = chunk.num_output_tokens
                if rid == "tight" and chunk.finished:
                    at_tight_end["loose"] = counts["loose"]

        await asyncio.gather(consume("tight", 0.010), consume("loose", 0.030))
        return at_tight_end["loose"], counts["loose"]

    loose_at_tight_end, loose_final = arun(scenario(), timeout_s=120)
    assert loose_final == TOKENS  # the loose request is slowed, not starved
    assert TOKENS // 6 <= loose_at_tight_end <= TOKENS // 2, loose_at_tight_end
