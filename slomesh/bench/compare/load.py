"""The client side of `bench-mesh --compare`: the official `openai` client streaming chat
completions against one system (unloaded probes, a max_tokens sweep, concurrency 8)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

_MESSAGES = [{"role": "user", "content": "measure the first token and every token after it"}]


@dataclass
class StreamTiming:
    first_s: float
    total_s: float
    tokens: int


async def one_stream(client: Any, model: str, max_tokens: int) -> StreamTiming:
    """One streamed chat completion: time to the first content chunk, to the end, and the
    completion tokens (usage when reported, else content chunks)."""
    t0 = time.perf_counter()
    first = 0.0
    chunks = usage = 0
    stream = await client.chat.completions.create(
        model=model,
        messages=_MESSAGES,
        max_tokens=max_tokens,
        temperature=0.0,
        stream=True,
        stream_options={"include_usage": True},
    )
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage.completion_tokens
        if chunk.choices and (chunk.choices[0].delta.content or chunk.choices[0].finish_reason):
            if not first:
                first = time.perf_counter() - t0
            if chunk.choices[0].delta.content:
                chunks += 1
    total = time.perf_counter() - t0
    return StreamTiming(first or total, total, usage or chunks)


async def sequential(client: Any, model: str, max_tokens: int, n: int) -> list[StreamTiming]:
    return [await one_stream(client, model, max_tokens) for _ in range(n)]


async def concurrent(
    client: Any, model: str, max_tokens: int, workers: int, seconds: float
) -> tuple[int, int, int, float]:
    """`workers` closed-loop clients for `seconds`: (requests, tokens, errors, elapsed)."""
    done = [0, 0, 0]
    t0 = time.perf_counter()
    stop_at = t0 + seconds

    async def worker() -> None:
        while time.perf_counter() < stop_at:
            try:
                t = await one_stream(client, model, max_tokens)
                done[0] += 1
                done[1] += t.tokens
            except Exception:
                done[2] += 1
                await asyncio.sleep(0.05)

    await asyncio.gather(*(worker() for _ in range(workers)))
    return done[0], done[1], done[2], time.perf_counter() - t0


def client_for(base_url: str) -> Any:
    from openai import AsyncOpenAI

    return AsyncOpenAI(base_url=base_url, api_key="bench", timeout=60.0, max_retries=0)


def answers(base_url: str, model: str) -> bool:
    """Whether one short chat completion comes back now (readiness probe)."""
    import httpx

    body = {"model": model, "messages": _MESSAGES, "max_tokens": 2}
    try:
        r = httpx.post(f"{base_url}/chat/completions", json=body, timeout=10.0)
        return r.status_code == 200 and "choices" in r.json()
    except (httpx.HTTPError, ValueError):
        return False
