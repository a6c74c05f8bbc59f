"""The open-loop client of `bench-mesh`'s capacity: what it counts and what it refuses to count."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web

from slomesh.bench.open_loop import ladder, percentiles_ms


async def _serve(fail_every: int) -> tuple[web.AppRunner, str, list[int]]:
    seen = [0]

    async def completions(request: web.Request) -> web.StreamResponse:
        seen[0] += 1
        if fail_every and seen[0] % fail_every == 0:
            return web.json_response({"error": {"message": "full"}}, status=429)
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b'data: {"choices":[{"text":""}]}\n\n')  # accept marker: no text yet
        await asyncio.sleep(0.02)
        await resp.write(b'data: {"choices":[{"text":"hi"}]}\n\n')
        await resp.write(b"data: [DONE]\n\n")
        return resp

    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}/v1/completions", seen


@pytest.mark.parametrize(
    ("fail_every", "warmup_s", "errors_at_least"),
    [
        (0, 0.0, 0),  # all served: the first token is the chunk with text, ~20 ms in
        (0, 0.5, 0),  # warm-up requests are sent but not counted
        (3, 0.0, 1),  # a 429 is an error, never a latency
    ],
)
def test_ladder_counts_first_text_chunk_and_errors(
    fail_every: int, warmup_s: float, errors_at_least: int
) -> None:
    async def run() -> tuple[list[dict[str, Any]], int]:
        runner, url, seen = await _serve(fail_every)
        try:
            steps = await ladder(url, "m", "p", [40.0], 1.0, seed=0, warmup_s=warmup_s)
        finally:
            await runner.cleanup()
        return steps, seen[0]

    steps, served = asyncio.run(run())
    (step,) = steps
    assert step["n"] + step["errors"] == 40  # int(rate * seconds) measured sends
    assert served > 40 if warmup_s else served == 40
    assert step["errors"] >= errors_at_least
    assert step["n"] == 0 or step["p50_ms"] >= 20.0  # not the empty accept marker
    assert step["send_lag_p99_ms"] >= 0.0


def test_percentiles_of_nothing_are_nan_not_an_error() -> None:
    empty = percentiles_ms([])
    assert empty["n"] == 0 and empty["p99_ms"] != empty["p99_ms"]
    assert percentiles_ms([0.001, 0.002])["p50_ms"] == pytest.approx(1.5)
