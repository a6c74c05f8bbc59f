"""Interactive load with and without a batch job (measurement 3a).

    .venv/bin/slomesh up --engine simulated &
    .venv/bin/python loadtest/batch_mixed.py --rate 6 --seconds 90 --batch-requests 2000 \
        --window 30m [--host http://127.0.0.1:8000] [--out runs/batch_mixed.json]

Two phases on the same mesh, the same open-loop Poisson interactive load (streaming chat, SLO
class --slo-class, seeded):
0. a --warmup-s run of the same load, not counted (the mesh's first requests are slower);
1. **alone**: the interactive load only;
2. **with batch**: a --batch-requests-line JSONL file is uploaded (`POST /v1/files`) and a batch
   created (`POST /v1/batches`, --window) just before the same interactive load starts; after
   the load the script polls the batch until it is final.

Prints one table: per phase, interactive requests sent, admitted (200), TTFT attainment of
the admitted (TTFT <= the class's TTFT SLO, and [DONE] received) and of all sent (a rejection
counts as a miss), TTFT p50/p99, and for the batch: requests done by the end of the
interactive load, its final status, its completion time (created_at to completed_at) and its
window.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from dataclasses import dataclass
from typing import Any

import httpx

from services.ingress.core.slo import class_set

SLO_TTFT_S = {
    name: spec.ttft_ms / 1e3
    for name, spec in class_set("default")[0].items()
    if spec.ttft_ms <= 60_000.0
}
"""Each interactive class's TTFT objective in seconds, read from the mesh's default class set."""
_WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "rivers",
    "run",
    "to",
    "the",
    "sea",
]


@dataclass
class Outcome:
    status: int | None = None
    ttft_s: float | None = None
    end_s: float | None = None
    tokens: int = 0
    done: bool = False

    @property
    def tpot_s(self) -> float | None:
        if self.ttft_s is None or self.end_s is None or self.tokens < 2:
            return None
        return (self.end_s - self.ttft_s) / (self.tokens - 1)


def _prompt(rng: random.Random) -> str:
    return "summarise this: " + " ".join(rng.choice(_WORDS) for _ in range(rng.randint(20, 60)))


async def _one(c: httpx.AsyncClient, body: dict[str, Any]) -> Outcome:
    o = Outcome()
    start = time.time()
    try:
        async with c.stream("POST", "/v1/chat/completions", json=body, timeout=60.0) as r:
            o.status = r.status_code
            async for line in r.aiter_lines():
                if line.startswith("data:") and o.ttft_s is None and '"content"' in line:
                    o.ttft_s = time.time() - start
                if line.startswith("data:") and '"usage"' in line and "completion_tokens" in line:
                    o.tokens = json.loads(line[5:])["usage"]["completion_tokens"]
                    o.end_s = time.time() - start
                if line.strip() == "data: [DONE]":
                    o.done = True
    except httpx.HTTPError:
        pass
    return o


async def interactive(
    c: httpx.AsyncClient, args: argparse.Namespace, seconds: float | None = None
) -> list[Outcome]:
    rng = random.Random(args.seed)
    t0, t, tasks = time.time(), 0.0, []
    while True:
        t += rng.expovariate(args.rate)
        if t >= (args.seconds if seconds is None else seconds):
            break
        await asyncio.sleep(max(0.0, t0 + t - time.time()))
        body = {
            "model": args.model,
            "messages": [{"role": "user", "content": _prompt(rng)}],
            "max_tokens": rng.choice([16, 64, 128]),
            "stream": True,
            "stream_options": {"include_usage": True},
            "slo": args.slo_class,
        }
        tasks.append(asyncio.create_task(_one(c, body)))
    return list(await asyncio.gather(*tasks))


def batch_file(n: int, model: str, seed: int) -> bytes:
    rng = random.Random(seed + 1)
    lines = [
        json.dumps(
            {
                "custom_id": f"req-{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {
                    "model": model,
                    "messages": [{"role": "user", "content": _prompt(rng)}],
                    "max_tokens": rng.choice([16, 64, 128]),
                },
            }
        )
        for i in range(n)
    ]
    return ("\n".join(lines) + "\n").encode()


def summary(outcomes: list[Outcome], ttft_slo_s: float) -> dict[str, Any]:
    admitted = [o for o in outcomes if o.status == 200]
    met = [o for o in admitted if o.done and o.ttft_s is not None and o.ttft_s <= ttft_slo_s]
    ttfts = sorted(o.ttft_s for o in admitted if o.ttft_s is not None)
    tpots = [t for t in (o.tpot_s for o in admitted) if t is not None]

    def q(p: float) -> float | None:
        return round(ttfts[min(len(ttfts) - 1, int(p * len(ttfts)))], 3) if ttfts else None

    return {
        "sent": len(outcomes),
        "admitted": len(admitted),
        "attainment_admitted_pct": round(100 * len(met) / len(admitted), 1) if admitted else None,
        "attainment_sent_pct": round(100 * len(met) / len(outcomes), 1) if outcomes else None,
        "ttft_p50_s": round(statistics.median(ttfts), 3) if ttfts else None,
        "ttft_p90_s": q(0.9),
        "ttft_p99_s": q(0.99),
        "tpot_median_ms": round(1e3 * statistics.median(tpots), 1) if tpots else None,
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    ttft_slo = SLO_TTFT_S[args.slo_class]
    limits = httpx.Limits(max_connections=2000, max_keepalive_connections=200)
    async with httpx.AsyncClient(base_url=args.host, limits=limits) as c:
        await interactive(c, args, args.warmup_s)  # warm-up, not counted
        await asyncio.sleep(args.pause_s)
        alone = summary(await interactive(c, args), ttft_slo)
        await asyncio.sleep(args.pause_s)
        up = await c.post(
            "/v1/files",
            files={"file": ("mixed.jsonl", batch_file(args.batch_requests, args.model, args.seed))},
            data={"purpose": "batch"},
            timeout=60.0,
        )
        up.raise_for_status()
        created = await c.post(
            "/v1/batches",
            json={
                "input_file_id": up.json()["id"],
                "endpoint": "/v1/chat/completions",
                "completion_window": args.window,
            },
        )
        created.raise_for_status()
        batch_id = created.json()["id"]
        mixed = summary(await interactive(c, args), ttft_slo)
        during = (await c.get(f"/v1/batches/{batch_id}")).json()
        deadline = time.time() + args.batch_timeout_s
        final = during
        while final["status"] not in ("completed", "failed", "expired", "cancelled"):
            if time.time() > deadline:
                break
            await asyncio.sleep(2.0)
            final = (await c.get(f"/v1/batches/{batch_id}")).json()
    end = final.get(f"{final['status']}_at") or None
    return {
        "slo_class": args.slo_class,
        "ttft_slo_s": ttft_slo,
        "rate": args.rate,
        "seconds": args.seconds,
        "alone": alone,
        "with_batch": mixed,
        "batch": {
            "id": batch_id,
            "requests": args.batch_requests,
            "window": args.window,
            "window_s": final["expires_at"] - final["created_at"],
            "done_by_end_of_load": during["request_counts"],
            "status": final["status"],
            "request_counts": final["request_counts"],
            "completion_s": (end - final["created_at"]) if end else None,
            "errors": final.get("errors"),
        },
    }


def table(r: dict[str, Any]) -> str:
    b = r["batch"]
    rows = [
        "| phase | interactive sent | admitted | TTFT attainment (admitted) | "
        "TTFT attainment (sent) | TTFT p50 / p90 / p99 | TPOT median | batch |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, key in (("alone", "alone"), ("with 2,000-request batch", "with_batch")):
        s = r[key]
        extra = "—"
        if key == "with_batch":
            done = b["done_by_end_of_load"]
            extra = (
                f"{done['completed']}/{done['total']} done by end of load; {b['status']} "
                f"in {b['completion_s'] or float('nan'):.0f} s of a {b['window_s']:.0f} s window"
            )
        rows.append(
            f"| {name} | {s['sent']} | {s['admitted']} | {s['attainment_admitted_pct']}% | "
            f"{s['attainment_sent_pct']}% | {s['ttft_p50_s']} / {s['ttft_p90_s']} / "
            f"{s['ttft_p99_s']} s | {s['tpot_median_ms']} ms | {extra} |"
        )
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--host", default="http://127.0.0.1:8000")
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--rate", type=float, default=6.0, help="interactive requests per second")
    ap.add_argument("--seconds", type=float, default=90.0, help="length of each load phase")
    ap.add_argument("--slo-class", default="chat", choices=sorted(SLO_TTFT_S))
    ap.add_argument("--batch-requests", type=int, default=2000)
    ap.add_argument("--window", default="30m", help="the batch's completion_window")
    ap.add_argument("--batch-timeout-s", type=float, default=1800.0)
    ap.add_argument("--pause-s", type=float, default=5.0, help="idle time between phases")
    ap.add_argument("--warmup-s", type=float, default=20.0, help="uncounted load first")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="write the report as JSON")
    args = ap.parse_args()
    report = asyncio.run(run(args))
    print(json.dumps(report, indent=1))
    print(table(report))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
