"""SLOEngineClient (services/replica/vllm/engine_client.py): slomesh's metadata (the SERVING
context variable the replica sets around its call of vLLM's application) reaches
SamplingParams.extra_args and the engine priority; output counting over vLLM's RequestOutputs
(DELTA, n > 1) and the status it reports."""

from __future__ import annotations

import asyncio
import contextvars
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from services.replica.vllm.engine_client import SERVING, SLOEngineClient


@dataclass
class _Choice:
    token_ids: list[int]
    finish_reason: str | None = None


@dataclass
class _Output:
    outputs: list[_Choice]
    finished: bool = False
    prompt_token_ids: list[int] | None = field(default_factory=lambda: [1, 2, 3])


class _LLM:
    """An AsyncLLM double: replays `outputs`, records each generate call's kwargs."""

    def __init__(self, outputs: list[_Output]) -> None:
        self.outputs = outputs
        self.kwargs: list[dict[str, Any]] = []

    async def generate(self, prompt: Any, params: Any, request_id: str, **kwargs: Any) -> Any:
        self.kwargs.append(kwargs)
        for out in self.outputs:
            yield out


def _drain(
    client: SLOEngineClient, meta: dict[str, Any] | None, params: Any = None, **kwargs: Any
) -> Any:
    """Run one generate call in a context where the replica set `meta`; the params it got."""
    params = params if params is not None else SimpleNamespace(extra_args=None)

    async def run() -> None:
        SERVING.set(meta)
        async for _ in client.generate("p", params, "vllm-id", **kwargs):
            pass

    contextvars.copy_context().run(asyncio.run, run())
    return params


@pytest.mark.parametrize(
    ("outputs", "tokens", "reason"),
    [
        # DELTA outputs of n=2: each carries the new tokens of the choices it names
        (
            [
                _Output([_Choice([5]), _Choice([6])]),
                _Output([_Choice([7], "length")]),
                _Output([_Choice([8], "length")], finished=True),
            ],
            4,
            "length",
        ),
        ([_Output([_Choice([1, 2], "stop")], finished=True)], 2, "stop"),
        # one choice stopped, one ran out: "length" wins (the budget bounded the request)
        ([_Output([_Choice([1], "length"), _Choice([2], "stop")], finished=True)], 2, "length"),
        ([_Output([_Choice([], None)], finished=True)], 0, "stop"),
    ],
)
def test_followed_counts_all_choices(outputs: list[_Output], tokens: int, reason: str) -> None:
    client = SLOEngineClient(_LLM(outputs))
    followed = client.follow("r1")
    meta = {"request_id": "r1", "priority": 1025}
    params = _drain(client, meta, SimpleNamespace(extra_args={"k": 1}), priority=-3)
    assert (followed.output_tokens, followed.finish_reason) == (tokens, reason)
    assert followed.prompt_tokens == 3 and followed.calls == 1 and not followed.running
    # the engine's order is slomesh's (computed by the ingress), whatever the body asked
    assert client.inner.kwargs == [{"priority": 1025}]
    assert params.extra_args == {"k": 1, "slomesh": meta}  # the scheduler hook reads it
    assert client.release("r1") is followed and client.release("r1") is None


def test_a_request_not_from_the_ingress_keeps_its_body_priority() -> None:
    llm = _LLM([_Output([_Choice([1], "stop")], finished=True)])
    client = SLOEngineClient(llm)
    params = _drain(client, None, priority=4)
    assert llm.kwargs == [{"priority": 4}]
    assert params.extra_args is None
    assert list(client.followed()) == []


def test_status_counts_waiting_and_running_and_prompt_tokens() -> None:
    stats = SimpleNamespace(latest=SimpleNamespace(kv_cache_usage=0.25))
    client = SLOEngineClient(_LLM([]), kv_total_blocks=100, stats=stats)
    waiting = client.follow("w")
    waiting.prompt_tokens = 11
    running = client.follow("r")
    running.output_tokens = 3
    done = client.follow("d")
    done.output_tokens, done.finish_reason = 5, "stop"
    st = client.status("m")
    assert (st.active_model, st.waiting, st.running) == ("m", 1, 1)
    assert (st.kv_used_blocks, st.kv_total_blocks, st.pending_prefill_tokens) == (25, 100, 11)
    for rid in ("w", "r", "d"):
        client.release(rid)
    assert client.status("m").kv_used_blocks == 0  # nothing followed: nothing held
