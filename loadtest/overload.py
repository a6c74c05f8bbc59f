"""Overload check: open-loop Poisson streaming load at a fixed rate, then recovery.

    .venv/bin/python loadtest/overload.py --rate 36 --seconds 60 [--host http://127.0.0.1:8000]

Reports, for requests sent during the load: answered within --answer-s (response headers, i.e.
a 200 stream start or a rejection), hangs (no headers within --answer-s), 200 streams finished
with [DONE], rejections with Retry-After, TTFT attainment of admitted requests per SLO class,
the RSS of the mesh's processes, and recovery: seconds after the load stops until a probe
request succeeds again (probes at 2/s).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import time
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

import httpx

SLO_S = {"interactive": 20.0, "batch-1": 60.0}


@dataclass
class Outcome:
    cls: str
    sent_s: float
    headers_s: float | None = None
    status: int | None = None
    retry_after: bool = False
    ttft_s: float | None = None
    done: bool = False
    error: str = ""


async def _one(c: httpx.AsyncClient, model: str, cls: str, t0: float, answer_s: float) -> Outcome:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "summarise this: " + "word " * 40}],
        "max_tokens": random.choice([16, 64, 128]),
        "stream": True,
        "slo": cls,
    }
    o = Outcome(cls, time.time() - t0)
    start = time.time()
    try:
        async with c.stream(
            "POST", "/v1/chat/completions", json=body, timeout=httpx.Timeout(answer_s)
        ) as r:
            o.headers_s, o.status = time.time() - start, r.status_code
            o.retry_after = "retry-after" in r.headers
            async for line in r.aiter_lines():
                if line.startswith("data:") and o.ttft_s is None and '"content"' in line:
                    o.ttft_s = time.time() - start
                if line.strip() == "data: [DONE]":
                    o.done = True
    except httpx.HTTPError as err:
        o.error = type(err).__name__
    return o


def _mesh_rss_mb() -> float:
    out = subprocess.run(["ps", "-eo", "rss,args"], capture_output=True, text=True).stdout
    keys = ("ray::", "raylet", "gcs_server", "slomesh up", "default_worker")
    return (
        sum(int(ln.split()[0]) for ln in out.splitlines()[1:] if any(k in ln for k in keys)) / 1024
    )


async def _recovery(c: httpx.AsyncClient, model: str, limit_s: float) -> float | None:
    t0 = time.time()
    while time.time() - t0 < limit_s:
        o = await _one(c, model, "interactive", t0, 10.0)
        if o.status == 200 and o.done:
            return time.time() - t0
        await asyncio.sleep(0.5)
    return None


async def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    random.seed(args.seed)
    limits = httpx.Limits(max_connections=4000, max_keepalive_connections=200)
    rss_before = _mesh_rss_mb()
    async with httpx.AsyncClient(base_url=args.host, limits=limits) as c:
        t0 = time.time()
        tasks, t = [], 0.0
        while t < args.seconds:
            t += rng.expovariate(args.rate)
            await asyncio.sleep(max(0.0, t0 + t - time.time()))
            cls = "interactive" if rng.random() < args.interactive else "batch-1"
            tasks.append(asyncio.create_task(_one(c, args.model, cls, t0, args.answer_s)))
        rss_peak = _mesh_rss_mb()
        load_end = time.time()
        recovery = await _recovery(c, args.model, 60.0)
        recovery_from_end = None if recovery is None else time.time() - load_end
        results: list[Outcome] = list(await asyncio.gather(*tasks))
    admitted = [o for o in results if o.status == 200]
    att = {}
    for cls, slo in SLO_S.items():
        xs = [o for o in admitted if o.cls == cls]
        ok = sum(1 for o in xs if o.done and o.ttft_s is not None and o.ttft_s <= slo)
        att[cls] = round(100.0 * ok / len(xs), 1) if xs else None
    return {
        "rate": args.rate,
        "seconds": args.seconds,
        "sent": len(results),
        "answered_within_s": sum(1 for o in results if o.headers_s is not None),
        "hangs": sum(1 for o in results if o.headers_s is None),
        "status": dict(Counter(str(o.status or o.error) for o in results)),
        "done_200": sum(1 for o in admitted if o.done),
        "admitted_not_done": sum(1 for o in admitted if not o.done),
        "rejected_with_retry_after": sum(
            1 for o in results if o.status in (429, 503) and o.retry_after
        ),
        "ttft_attainment_admitted_pct": att,
        "recovery_s_after_load": None if recovery_from_end is None else round(recovery_from_end, 1),
        "mesh_rss_mb": {"before": round(rss_before), "during": round(rss_peak)},
        "answer_s": args.answer_s,
        "outcomes": [asdict(o) for o in results] if args.keep else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--host", default="http://127.0.0.1:8000")
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--rate", type=float, required=True, help="requests per second")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--interactive", type=float, default=0.7, help="share of interactive")
    ap.add_argument("--answer-s", type=float, default=10.0, help="a hang: no headers by then")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="write the report as JSON")
    ap.add_argument("--keep", action="store_true", help="keep every request's outcome in --out")
    args = ap.parse_args()
    report = asyncio.run(run(args))
    outcomes = report.pop("outcomes")
    print(json.dumps(report, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report | ({"outcomes": outcomes} if outcomes else {}), f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
