"""Hostile-client suite: attacks run one after another against a live mesh (`slomesh up`), each
while ordinary streaming requests go on, reporting per attack the answer the attacker got,
the ingress replicas' RSS (before, peak during, after), Serve's HTTP proxy's RSS, the Batch
API's disk use before and after, and the p99 first-token latency of the ordinary requests
served meanwhile (the `baseline` row: the same load with no attack).

    .venv/bin/python loadtest/hostile.py [--host http://127.0.0.1:8100] [--rate 10] \
        [--attacks upload_chunked_over_cap,...] [--out report.json]

--host is the door the attacks and the ordinary load use: the ingress replicas' own front door
(8100, what `slomesh up` prints) or Serve's proxy (8000). One function per attack (`ATTACKS`);
each returns the answer it got as text ("413", "429 x3 + 408 x5", ...). The expected answers
are in `EXPECTED`; the report marks each row ok or not.

Attack bodies are written on raw sockets (chunked or with a Content-Length, as the attack
says) while the response is awaited: the attacker stops sending once it is answered and the
report says how many bytes it had written by then.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from hostile_tenants import fairness_ids_10k, fairness_ids_met
from hostile_uploads import (
    OrdinaryLoad,
    batches_chunked_over_cap,
    disk_mb,
    file_count_cap,
    ingress_rss_mb,
    open_batch_cap,
    proxy_rss_mb,
    stalled_uploads,
    upload_chunked_over_cap,
    upload_declared_over_cap,
    upload_endless_line,
)

ATTACKS: dict[str, Callable[[str], Awaitable[str]]] = {
    f.__name__: f
    for f in (
        upload_chunked_over_cap,
        upload_declared_over_cap,
        batches_chunked_over_cap,
        upload_endless_line,
        stalled_uploads,
        file_count_cap,
        open_batch_cap,
        fairness_ids_10k,
    )
}
EXPECTED = {
    "upload_chunked_over_cap": "413",
    "upload_declared_over_cap": "413",
    "batches_chunked_over_cap": "413",
    "upload_endless_line": "400",
    "stalled_uploads": "408/429 only",
    "file_count_cap": "429 after 1000; deletes 200",
    "open_batch_cap": "429 after 100; DELETE in use 409, after cancel 200",
    "fairness_ids_10k": "200 only; scheduler RSS +<= 50 MB; tenant series <= 67; p99 +-20%",
}


def _ok(name: str, answer: str) -> bool:
    if name == "stalled_uploads":
        codes = {part.split()[0] for part in answer.split(" + ")}
        return codes <= {"408", "429"} and "429" in codes
    if name == "file_count_cap":
        return answer.startswith("429") and "after 1000 files" in answer and "{200:" in answer
    if name == "fairness_ids_10k":
        return fairness_ids_met(answer)
    if name == "open_batch_cap":
        return answer.startswith("429") and "in use 409" in answer and "after cancel 200" in answer
    return answer.startswith(EXPECTED[name])


async def run_one(host: str, rate: float, name: str, seconds: float) -> dict[str, Any]:
    """One row: the attack (or, for `baseline`, `seconds` of ordinary load alone)."""
    load = OrdinaryLoad(host, rate)
    stop = asyncio.Event()
    before = {"ingress": ingress_rss_mb(), "proxy": proxy_rss_mb(), "disk": disk_mb()}
    peak = dict(before)

    async def sample() -> None:
        while not stop.is_set():
            peak["ingress"] = max(peak["ingress"], ingress_rss_mb())
            peak["proxy"] = max(peak["proxy"], proxy_rss_mb())
            await asyncio.sleep(0.5)

    load_task = asyncio.create_task(load.run(stop))
    sampler = asyncio.create_task(sample())
    t0 = time.time()
    if name == "baseline":
        await asyncio.sleep(seconds)
        answer = "-"
    else:
        await asyncio.sleep(2.0)  # the load is flowing before the attack starts
        answer = await ATTACKS[name](host)
    took = time.time() - t0
    stop.set()
    await asyncio.gather(load_task, sampler)
    after = {"ingress": ingress_rss_mb(), "proxy": proxy_rss_mb(), "disk": disk_mb()}
    return {
        "attack": name,
        "answer": answer,
        "ok": name == "baseline" or _ok(name, answer),
        "seconds": round(took, 1),
        "ingress_rss_mb": [
            round(before["ingress"]),
            round(peak["ingress"]),
            round(after["ingress"]),
        ],
        "proxy_rss_mb": [round(before["proxy"]), round(peak["proxy"]), round(after["proxy"])],
        "disk_mb": [round(before["disk"], 1), round(after["disk"], 1)],
        "ordinary": len(load.ttft_s),
        "ordinary_errors": dict(load.errors),
        "ordinary_ttft_p99_ms": round(load.p99_ms() or 0.0),
    }


def table(rows: list[dict[str, Any]]) -> str:
    out = [
        "| attack | answer | ok | ingress RSS MB before / peak / after | proxy RSS MB before / "
        "peak / after | disk MB before / after | ordinary p99 TTFT ms (n, errors) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        errors = f", errors {r['ordinary_errors']}" if r["ordinary_errors"] else ""
        out.append(
            f"| {r['attack']} | {r['answer']} | {'yes' if r['ok'] else 'NO'} | "
            + " / ".join(map(str, r["ingress_rss_mb"]))
            + " | "
            + " / ".join(map(str, r["proxy_rss_mb"]))
            + f" | {r['disk_mb'][0]} / {r['disk_mb'][1]} | "
            f"{r['ordinary_ttft_p99_ms']} ({r['ordinary']}{errors}) |"
        )
    return "\n".join(out)


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    names = ["baseline", *(args.attacks.split(",") if args.attacks else ATTACKS)]
    rows = []
    for name in names:
        row = await run_one(args.host, args.rate, name, args.baseline_s)
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="http://127.0.0.1:8100")
    ap.add_argument("--rate", type=float, default=10.0, help="ordinary requests per second")
    ap.add_argument("--baseline-s", type=float, default=20.0)
    ap.add_argument("--attacks", help=f"comma-separated subset of {', '.join(ATTACKS)}")
    ap.add_argument("--out", help="write the rows as JSON")
    args = ap.parse_args()
    rows = asyncio.run(main_async(args))
    print(table(rows))
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
