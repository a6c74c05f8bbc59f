"""vLLM's tokens per output from the replica's message interval and the measured time per token
(services/replica/vllm/output_pace.py), and SLOEngineClient setting it on each request's
SamplingParams.stream_interval from the outputs it has seen."""

from __future__ import annotations

import asyncio
import contextvars
import math
from types import SimpleNamespace
from typing import Any

import pytest

from services.replica.vllm.engine_client import SERVING, SLOEngineClient
from services.replica.vllm.output_pace import MAX_TOKENS_PER_OUTPUT, OutputPace, tokens_per_output


@pytest.mark.parametrize(
    ("batch_s", "token_s", "expected"),
    [
        (0.025, 0.004, 6),  # 25 ms at 4 ms a token: 6 whole tokens
        (0.025, 0.030, 1),  # a token slower than the budget: one per output, vLLM's default
        (0.0, 0.004, 1),  # no budget: one per output
        (0.025, 0.0, 1),  # nothing measured yet
        (0.025, math.inf, 1),
        (1.0, 0.0001, MAX_TOKENS_PER_OUTPUT),  # capped
        (0.010, 0.005, 2),
    ],
)
def test_tokens_per_output(batch_s: float, token_s: float, expected: int) -> None:
    assert tokens_per_output(batch_s, token_s) == expected


def test_pace_is_a_smoothed_time_per_token() -> None:
    pace = OutputPace(batch_s=0.02, smoothing=0.5)
    assert pace.tokens_per_output() == 1  # nothing measured
    pace.observe(0.008, 2)  # 4 ms a token: the first measurement is taken whole
    assert pace.token_s == pytest.approx(0.004)
    assert pace.tokens_per_output() == 5
    pace.observe(0.0, 3)  # no time passed, or no tokens: not a measurement
    pace.observe(0.01, 0)
    assert pace.token_s == pytest.approx(0.004)
    pace.observe(0.012, 1)  # 12 ms: halfway there with smoothing 0.5
    assert pace.token_s == pytest.approx(0.008)
    assert pace.tokens_per_output() == 2


class _LLM:
    """An AsyncLLM double: each call yields one-token DELTA outputs `gap_s` apart."""

    def __init__(self, outputs: int, gap_s: float, choices: int = 1) -> None:
        self.outputs, self.gap_s, self.choices = outputs, gap_s, choices
        self.params: list[Any] = []

    async def generate(self, prompt: Any, params: Any, request_id: str, **kwargs: Any) -> Any:
        self.params.append(params)
        for i in range(self.outputs):
            await asyncio.sleep(self.gap_s)
            last = i == self.outputs - 1
            choices = [
                SimpleNamespace(token_ids=[7], finish_reason="length" if last else None)
                for _ in range(self.choices)
            ]
            yield SimpleNamespace(outputs=choices, finished=last, prompt_token_ids=[1])


def _serve(client: SLOEngineClient, rid: str) -> Any:
    params = SimpleNamespace(extra_args=None, stream_interval=None)

    async def run() -> None:
        SERVING.set({"request_id": rid, "priority": 0})
        client.follow(rid)
        async for _ in client.generate("p", params, rid):
            pass
        client.release(rid)

    contextvars.copy_context().run(asyncio.run, run())
    return params


def test_the_client_sets_vllms_stream_interval_from_what_it_measured() -> None:
    client = SLOEngineClient(_LLM(outputs=4, gap_s=0.02))
    client.pace.batch_s = 1.0  # a budget far above the pace: the count is not near a boundary
    first = _serve(client, "a")
    assert first.stream_interval is None  # nothing measured yet: vLLM's own setting
    assert client.pace.token_s >= 0.02  # three gaps measured, the first output not counted
    expected = tokens_per_output(1.0, client.pace.token_s)  # before b's outputs update it
    second = _serve(client, "b")
    assert second.stream_interval == expected > 1


def test_no_budget_or_merged_choices_leave_vllms_setting() -> None:
    off = SLOEngineClient(_LLM(outputs=3, gap_s=0.01))  # pace.batch_s 0: one token per output
    _serve(off, "a")
    assert off.pace.token_s > 0 and _serve(off, "b").stream_interval is None
    merged = SLOEngineClient(_LLM(outputs=3, gap_s=0.01, choices=2))
    merged.pace.batch_s = 1.0
    _serve(merged, "a")  # n = 2: outputs carry both choices' tokens, no time per token
    assert merged.pace.token_s == 0 and _serve(merged, "b").stream_interval is None
