"""Open-loop Poisson load for `bench-mesh`'s admission capacity: time to first token per rate.

The client is aiohttp (its HTTP parser is C): a client in pure Python spends enough CPU at
high rates to measure itself as much as the mesh. Each step reports `send_lag_p99_ms` (how
late the generator sent against its Poisson schedule): a step whose lag is large measured the
client, not the mesh.
Each rate starts with `warmup_s` of unmeasured load at that rate (connections, lazily built
stubs, the first lease grants), so a step's p99 is the steady state, not the first second.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np

MESH_PROMPT = "measure the mesh"
"""The prompt of every request `bench-mesh` (and the shard ladder) sends."""
MESH_MODELS = {"simulated": "llama-3.1-8b", "vllm": "tiny-llama"}
"""The model those requests name, per engine of the mesh."""


def percentiles_ms(xs: list[float]) -> dict[str, float]:
    """p50/p99 in ms of durations in seconds (NaN when empty) and their count."""
    if not xs:
        return {"p50_ms": float("nan"), "p99_ms": float("nan"), "n": 0}
    a = np.asarray(xs) * 1e3
    return {
        "p50_ms": float(np.percentile(a, 50)),
        "p99_ms": float(np.percentile(a, 99)),
        "n": len(xs),
    }


async def first_token_s(session: Any, url: str, body: dict[str, Any]) -> float:
    """Seconds from send to the first SSE chunk with text; reads the stream to its end."""
    t = time.perf_counter()
    async with session.post(url, json=body) as resp:
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {(await resp.read())[:200]!r}")
        ttft = None
        async for line in resp.content:  # lines: the request completes before we return
            if ttft is None and line.startswith(b"data: {") and b'"text":""' not in line:
                ttft = time.perf_counter() - t
    if ttft is None:
        raise RuntimeError("stream ended without output")
    return ttft


async def _one_rate(
    session: Any,
    url: str,
    body: dict[str, Any],
    rate: float,
    seconds: float,
    rng: np.random.Generator,
) -> tuple[list[float], int, list[float], float]:
    gaps = rng.exponential(1.0 / rate, max(1, int(rate * seconds)))
    lat: list[float] = []
    lags: list[float] = []
    errors = [0]

    async def one() -> None:
        try:
            lat.append(await first_token_s(session, url, body))
        except Exception:
            errors[0] += 1

    tasks = []
    t0 = time.perf_counter()
    for at in np.cumsum(gaps):
        delay = at - (time.perf_counter() - t0)
        if delay > 0:
            await asyncio.sleep(delay)
        lags.append(max(0.0, (time.perf_counter() - t0) - at))
        tasks.append(asyncio.create_task(one()))
    await asyncio.gather(*tasks)
    return lat, errors[0], lags, time.perf_counter() - t0


async def ladder(
    url: str,
    model: str,
    prompt: str,
    rates: list[float],
    seconds: float,
    seed: int,
    warmup_s: float = 2.0,
) -> list[dict[str, Any]]:
    """One step per rate: p50/p99 first token, errors, achieved rate and send lag."""
    import aiohttp

    body = {"model": model, "prompt": prompt, "max_tokens": 8, "stream": True}
    rng = np.random.default_rng(seed)
    steps = []
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=30.0)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        for rate in rates:
            if warmup_s > 0:
                await _one_rate(session, url, body, rate, warmup_s, rng)
            lat, errors, lags, took = await _one_rate(session, url, body, rate, seconds, rng)
            lag = percentiles_ms(lags)
            steps.append(
                {
                    "rate_rps": rate,
                    "achieved_rps": len(lat) / took,
                    "errors": errors,
                    "send_lag_p99_ms": lag["p99_ms"],
                    **percentiles_ms(lat),
                }
            )
            print(
                f"  rate {rate:g}/s: p50 {steps[-1]['p50_ms']:.1f} ms, "
                f"p99 {steps[-1]['p99_ms']:.1f} ms, errors {errors}, "
                f"send lag p99 {lag['p99_ms']:.1f} ms"
            )
    return steps
