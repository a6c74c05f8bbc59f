"""Overload check: open-loop Poisson streaming load at a fixed rate, then recovery.

    .venv/bin/python loadtest/overload.py --rate 36 --seconds 60 [--host http://127.0.0.1:8000]

--host is the mesh's HTTP door without /v1: Serve's proxy (8000, the default) or the ingress
replicas' own front door (http://127.0.0.1:8100, what `slomesh up` prints as the OpenAI API).

Reports, for requests sent during the load: answered within --answer-s (response headers, i.e.
a 200 stream start or a rejection), hangs (no headers within --answer-s), 200 streams finished
with [DONE], rejections with Retry-After, TTFT attainment of admitted requests per SLO class,
the RSS of the mesh's processes, and recovery: seconds after the load stops until a probe
request succeeds again (probes at 2/s).

The client is aiohttp (its HTTP parser is C): on 2 shared cores httpx cost the generator about
a third of a core at 90 req/s, CPU the mesh then lacked. Times are wall clock from just before
the request is sent: headers (answer or rejection) and the first content chunk (TTFT). A request
without response headers within --answer-s is a hang. `--procs N` splits the arrivals over N
processes (round robin over one Poisson stream) when one event loop falls behind; the report
says how late the generator sent (`send_lag_ms`), so a slow generator shows.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import random
import resource
import statistics
import subprocess
import time
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

import aiohttp

SLO_S = {"interactive": 20.0, "batch-1": 60.0}
MAX_TOKENS = (16, 64, 128)


@dataclass
class Outcome:
    cls: str
    sent_s: float
    send_lag_s: float = 0.0
    headers_s: float | None = None
    status: int | None = None
    retry_after: bool = False
    ttft_s: float | None = None
    done: bool = False
    openai_error: bool | None = None
    """For an error status: whether its body is OpenAI's error JSON."""
    drop_reason: str = ""
    """x-slomesh-drop-reason of a rejection; "...+held" when the ingress's reject gate answered."""
    error: str = ""


async def _one(
    session: aiohttp.ClientSession,
    url: str,
    model: str,
    cls: str,
    max_tokens: int,
    answer_s: float,
    o: Outcome,
) -> Outcome:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "summarise this: " + "word " * 40}],
        "max_tokens": max_tokens,
        "stream": True,
        "slo": cls,
    }
    start = time.time()
    try:
        r = await asyncio.wait_for(session.post(url, json=body), answer_s)
    except (TimeoutError, aiohttp.ClientError) as err:
        o.error = type(err).__name__
        return o
    o.headers_s, o.status = time.time() - start, r.status
    o.retry_after = "Retry-After" in r.headers
    try:
        async with r:
            if r.status >= 400:
                body = await r.read()
                o.openai_error = _openai_shaped(body)
                o.drop_reason = r.headers.get("x-slomesh-drop-reason", "")
                if b"held at the ingress" in body:
                    o.drop_reason += "+held"
                return o
            async for line in r.content:
                if o.ttft_s is None and line.startswith(b"data:") and b'"content"' in line:
                    o.ttft_s = time.time() - start
                if line.strip() == b"data: [DONE]":
                    o.done = True
    except (TimeoutError, aiohttp.ClientError) as err:
        o.error = type(err).__name__
    return o


def _openai_shaped(body: bytes) -> bool:
    try:
        error = json.loads(body)["error"]
        return {"message", "type", "param", "code"} <= set(error)
    except (ValueError, KeyError, TypeError):
        return False


def _session(answer_s: float) -> aiohttp.ClientSession:
    # sock_read: a started stream that sends nothing for answer_s is cut (counted not done)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=answer_s)
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout)


async def _load(
    host: str, model: str, plan: list[tuple[float, str, int]], t0: float, answer_s: float
) -> list[Outcome]:
    """Send each planned request (offset from t0 in s, class, max_tokens) on time."""
    url = host + "/v1/chat/completions"
    async with _session(answer_s) as session:
        tasks = []
        for at, cls, max_tokens in plan:
            await asyncio.sleep(max(0.0, t0 + at - time.time()))
            o = Outcome(cls, at, send_lag_s=time.time() - (t0 + at))
            tasks.append(
                asyncio.create_task(_one(session, url, model, cls, max_tokens, answer_s, o))
            )
        return list(await asyncio.gather(*tasks))


def _child(job: tuple[str, str, list[tuple[float, str, int]], float, float]) -> list[dict]:
    return [asdict(o) for o in asyncio.run(_load(*job))]


def _mesh_rss_mb() -> float:
    out = subprocess.run(["ps", "-eo", "rss,args"], capture_output=True, text=True).stdout
    keys = ("ray::", "raylet", "gcs_server", "slomesh up", "default_worker")
    return (
        sum(int(ln.split()[0]) for ln in out.splitlines()[1:] if any(k in ln for k in keys)) / 1024
    )


async def _recovery(host: str, model: str, limit_s: float) -> float | None:
    t0 = time.time()
    url = host + "/v1/chat/completions"
    async with _session(10.0) as session:
        while time.time() - t0 < limit_s:
            o = await _one(session, url, model, "interactive", 16, 10.0, Outcome("probe", 0.0))
            if o.status == 200 and o.done:
                return time.time() - t0
            await asyncio.sleep(0.5)
    return None


def plan_arrivals(
    rate: float, seconds: float, interactive: float, seed: int
) -> list[tuple[float, str, int]]:
    """Open-loop Poisson arrivals: (offset s, SLO class, max_tokens) each, seeded."""
    rng = random.Random(seed)
    plan, t = [], 0.0
    while True:
        t += rng.expovariate(rate)
        if t >= seconds:
            return plan
        cls = "interactive" if rng.random() < interactive else "batch-1"
        plan.append((t, cls, rng.choice(MAX_TOKENS)))


def run(args: argparse.Namespace) -> dict[str, Any]:
    plan = plan_arrivals(args.rate, args.seconds, args.interactive, args.seed)
    rss_before = _mesh_rss_mb()
    t0 = time.time() + 1.0  # every process starts on the same clock
    jobs = [
        (args.host, args.model, plan[i :: args.procs], t0, args.answer_s) for i in range(args.procs)
    ]
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(args.procs) as pool:
        pending = pool.map_async(_child, jobs)
        rss_peak = rss_before
        while time.time() < t0 + args.seconds:
            time.sleep(min(2.0, max(0.0, t0 + args.seconds - time.time())))
            rss_peak = max(rss_peak, _mesh_rss_mb())
        load_end = time.time()
        recovery = asyncio.run(_recovery(args.host, args.model, 60.0))
        recovery_from_end = None if recovery is None else time.time() - load_end
        results = [Outcome(**d) for part in pending.get() for d in part]
    admitted = [o for o in results if o.status == 200]
    att = {}
    for cls, slo in SLO_S.items():
        xs = [o for o in admitted if o.cls == cls]
        ok = sum(1 for o in xs if o.done and o.ttft_s is not None and o.ttft_s <= slo)
        att[cls] = round(100.0 * ok / len(xs), 1) if xs else None
    lags = sorted(o.send_lag_s for o in results) or [0.0]
    return {
        "rate": args.rate,
        "seconds": args.seconds,
        "procs": args.procs,
        "sent": len(results),
        "answered_within_s": sum(1 for o in results if o.headers_s is not None),
        "hangs": sum(1 for o in results if o.headers_s is None),
        "status": dict(Counter(str(o.status or o.error) for o in results)),
        "done_200": sum(1 for o in admitted if o.done),
        "admitted_not_done": sum(1 for o in admitted if not o.done),
        "rejected_with_retry_after": sum(
            1 for o in results if o.status in (429, 503) and o.retry_after
        ),
        "errors_openai_shaped": sum(1 for o in results if o.openai_error),
        "errors_not_openai_shaped": sum(1 for o in results if o.openai_error is False),
        "rejections_by_drop_reason": dict(
            Counter(o.drop_reason for o in results if o.status and o.status >= 400)
        ),
        "ttft_attainment_admitted_pct": att,
        "answer_p99_s": _p(sorted(o.headers_s for o in results if o.headers_s is not None), 0.99),
        "send_lag_ms": {
            "p50": round(1e3 * statistics.median(lags), 1),
            "p99": round(1e3 * _p(lags, 0.99), 1),
            "max": round(1e3 * lags[-1], 1),
        },
        "generator_cpu_s": round(_cpu_s(), 1),
        "recovery_s_after_load": None if recovery_from_end is None else round(recovery_from_end, 1),
        "mesh_rss_mb": {"before": round(rss_before), "peak_during": round(rss_peak)},
        "answer_s": args.answer_s,
        "outcomes": [asdict(o) for o in results] if args.keep else None,
    }


def _cpu_s() -> float:
    """CPU seconds of this process and its finished load processes (the generator's share)."""
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _p(xs: list[float], q: float) -> float:
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 3) if xs else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument(
        "--host",
        default="http://127.0.0.1:8000",
        help="the mesh's HTTP door: Serve's proxy (default) or the ingress front door "
        "http://127.0.0.1:8100",
    )
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--rate", type=float, required=True, help="requests per second")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--interactive", type=float, default=0.7, help="share of interactive")
    ap.add_argument("--answer-s", type=float, default=10.0, help="a hang: no headers by then")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--procs", type=int, default=1, help="load-generator processes")
    ap.add_argument("--out", help="write the report as JSON")
    ap.add_argument("--keep", action="store_true", help="keep every request's outcome in --out")
    args = ap.parse_args()
    report = run(args)
    outcomes = report.pop("outcomes")
    print(json.dumps(report, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report | ({"outcomes": outcomes} if outcomes else {}), f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
