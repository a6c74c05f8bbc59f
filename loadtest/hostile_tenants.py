"""The fairness-id flood: ten thousand fresh tenant ids against a live mesh, checking that every
request is served and the scheduler's memory, metric series and admission latency stay bounded
(`loadtest/hostile.py` runs it)."""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections import Counter

import aiohttp
from hostile_uploads import MODEL, rss_mb

METRICS_URL = "http://127.0.0.1:8080/metrics"
"""`slomesh up`'s Prometheus export (its default --metrics-port)."""
TENANT_SERIES = (
    "ray_slomesh_tenant_virtual_tokens",
    "ray_slomesh_tenant_charged_tokens",
    "ray_slomesh_tenant_tokens_total",
)


def scheduler_rss_mb() -> float:
    """RSS of the scheduler replica."""
    return rss_mb("ServeReplica:scheduler")


async def _admission_p99_ms(session: aiohttp.ClientSession, host: str, n: int) -> float:
    """p99 time to the first content chunk of `n` one-token streams sent one at a time (the
    admission path with no queueing: predict, admit, replica accept)."""
    body = {"model": MODEL, "prompt": "probe", "max_tokens": 1, "stream": True}
    took = []
    for _ in range(n):
        t0 = time.perf_counter()
        async with session.post(host + "/v1/completions", json=body) as r:
            async for line in r.content:
                if line.startswith(b"data: "):
                    took.append(time.perf_counter() - t0)
                    break
            async for _ in r.content:
                pass
    return statistics.quantiles(took, n=100)[98] * 1e3


def _label(line: str, key: str) -> str:
    return line.split(f'{key}="', 1)[1].split('"', 1)[0] if f'{key}="' in line else ""


async def _tenant_series(session: aiohttp.ClientSession, url: str) -> dict[str, int]:
    """Per per-tenant metric family, the most distinct `tenant` label values one replica
    exports (each replica bounds its own set)."""
    async with session.get(url) as r:
        text = await r.text()
    seen: dict[tuple[str, str], set[str]] = {}
    for line in text.splitlines():
        name = line.split("{", 1)[0]
        if name in TENANT_SERIES and 'tenant="' in line:
            key = (name, _label(line, "replica"))
            seen.setdefault(key, set()).add(_label(line, "tenant"))
    return {
        name.removeprefix("ray_slomesh_"): max(
            (len(v) for (n, _), v in seen.items() if n == name), default=0
        )
        for name in TENANT_SERIES
    }


async def fairness_ids_10k(
    host: str, n: int = 10_000, concurrency: int = 32, metrics_url: str = METRICS_URL
) -> str:
    """`n` one-token requests, each naming a fresh `x-gateway-inference-fairness-id`: every one
    is served (the ingress folds ids beyond tenancy.max_header_tenants into `overflow`), the
    scheduler's RSS grows by at most 50 MB, each per-tenant metric family exports a bounded
    set of tenant labels, and the admission p99 of probe requests before and after is the
    same within 20%."""
    statuses: Counter[str] = Counter()
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        p99_before = await _admission_p99_ms(session, host, 200)
        rss_before = scheduler_rss_mb()
        ids = iter(range(n))

        async def attacker() -> None:
            for k in ids:
                headers = {"x-gateway-inference-fairness-id": f"hostile-{k:05d}-{os.getpid()}"}
                body = {"model": MODEL, "prompt": f"tenant {k}", "max_tokens": 1}
                try:
                    async with session.post(
                        host + "/v1/completions", json=body, headers=headers
                    ) as r:
                        await r.read()
                        statuses[str(r.status)] += 1
                except Exception as exc:
                    statuses[type(exc).__name__] += 1

        await asyncio.gather(*(attacker() for _ in range(concurrency)))
        await asyncio.sleep(12.0)  # the scheduler's per-tenant gauges refresh every 5 s
        rss_after = scheduler_rss_mb()
        series = await _tenant_series(session, metrics_url)
        p99_after = await _admission_p99_ms(session, host, 200)
    answers = " + ".join(f"{code} x{count}" for code, count in statuses.most_common())
    listed = ", ".join(f"{k} {v}" for k, v in series.items())
    return (
        f"{answers}; scheduler RSS {rss_before:.0f} -> {rss_after:.0f} MB "
        f"(+{rss_after - rss_before:.0f}); tenant series {listed}; admission p99 "
        f"{p99_before:.1f} -> {p99_after:.1f} ms ({(p99_after / p99_before - 1) * 100:+.0f}%)"
    )


def fairness_ids_met(answer: str, series_cap: int = 64 + 3, growth_mb: float = 50.0) -> bool:
    """The targets: only 200s, scheduler growth <= growth_mb, every family <= series_cap
    labels (the 64 named, other, anonymous, overflow), p99 within 20%."""
    head, rss, series, p99 = answer.split("; ")
    only_200 = all(part.startswith("200 ") for part in head.split(" + "))
    grown = float(rss.rsplit("(+", 1)[1].rstrip(")"))
    counts = [
        int(part.rsplit(" ", 1)[1]) for part in series.removeprefix("tenant series ").split(", ")
    ]
    change = float(p99.rsplit("(", 1)[1].rstrip("%)"))
    return only_200 and grown <= growth_mb and max(counts) <= series_cap and abs(change) <= 20
