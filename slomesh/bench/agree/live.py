"""The live side of `bench-agree`: an open-loop asyncio client against a running mesh.

Each request is sent at its exact arrival offset (no Locust, no closed loop) to
/v1/completions with its exact-length text prompt, `max_tokens` = its output length,
`ignore_eos` (the output length is forced), its SLO class, and streaming with usage. Times are
taken on the client's monotonic clock from the moment the request is sent: arrival = send,
first token = first chunk with text, finish = the end of the stream. A 4xx/5xx answer is a
rejection (an SLO miss, as in the simulator).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from shared.metrics.records import RequestRecord
from slomesh.bench.agree.workload import AgreeRequest


async def _one(
    client: httpx.AsyncClient,
    req: AgreeRequest,
    prompt: str,
    model: str,
    t0: float,
) -> RequestRecord:
    delay = t0 + req.arrival_s - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)
    sent = time.monotonic() - t0
    model = req.model or model
    body = {
        "model": model,
        "prompt": prompt,
        "max_tokens": req.output_tokens,
        "ignore_eos": True,
        "temperature": 0.0,
        "slo": req.class_name,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    first: float | None = None
    tokens = 0
    reason: str | None = None
    try:
        async with client.stream("POST", "/v1/completions", json=body) as resp:
            if resp.status_code != 200:
                text = (await resp.aread()).decode(errors="replace")
                reason = f"HTTP {resp.status_code}: {text[:200]}"
            else:
                async for line in resp.aiter_lines():
                    if not line.startswith("data: "):
                        continue
                    data = line.removeprefix("data: ").strip()
                    if data == "[DONE]":
                        break
                    chunk: dict[str, Any] = json.loads(data)
                    choices = chunk.get("choices") or []
                    if first is None and choices and choices[0].get("text"):
                        first = time.monotonic() - t0
                    usage = chunk.get("usage")
                    if usage:
                        tokens = int(usage.get("completion_tokens", tokens))
    except httpx.HTTPError as err:
        reason = f"{type(err).__name__}: {err}"
    finish = time.monotonic() - t0
    domain = req.to_request(model, arrival_s=sent)
    if reason is not None:
        return RequestRecord.from_request(domain, None, None, None, 0, reject_reason=reason)
    return RequestRecord.from_request(
        domain, None, first if first is not None else finish, finish, tokens
    )


async def replay(
    base_url: str,
    model: str,
    requests: Sequence[AgreeRequest],
    prompt_of: Callable[[AgreeRequest], str],
    start_delay_s: float = 1.0,
    started: Callable[[float], None] | None = None,
) -> list[RequestRecord]:
    """Send every request at its arrival offset, naming its own model where it has one, else
    `model`; one record per request, in trace order. `started` is given the wall time (s) of
    offset 0 (to date the mesh's own logs on the trace's clock)."""
    prompts = [prompt_of(r) for r in requests]  # built before the clock starts
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=256)
    timeout = httpx.Timeout(3600.0, connect=30.0)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=timeout) as client:
        t0 = time.monotonic() + start_delay_s
        if started is not None:
            started(time.time() + start_delay_s)
        tasks = [_one(client, r, p, model, t0) for r, p in zip(requests, prompts, strict=True)]
        return list(await asyncio.gather(*tasks))


async def warm_up(base_url: str, model: str, prompt: str, n: int = 4) -> None:
    """A few short requests first (first-request costs in vLLM and Serve stay out of the run)."""
    async with httpx.AsyncClient(base_url=base_url, timeout=120.0) as client:
        for _ in range(n):
            r = await client.post(
                "/v1/completions",
                json={"model": model, "prompt": prompt, "max_tokens": 4, "ignore_eos": True},
            )
            r.raise_for_status()
