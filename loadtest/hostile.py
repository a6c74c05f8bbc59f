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
import contextlib
import json
import os
import statistics
import subprocess
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp

MODEL = "llama-3.1-8b"
MB = 1024 * 1024
BOUNDARY = "hostileboundary"
STORE = Path("~/.cache/slomesh/batches").expanduser()


# measuring ----------------------------------------------------------------------------------


def _rss_mb(marker: str) -> float:
    out = subprocess.run(["ps", "-eo", "rss,args"], capture_output=True, text=True).stdout
    return sum(int(ln.split()[0]) for ln in out.splitlines()[1:] if marker in ln) / 1024


def ingress_rss_mb() -> float:
    """RSS of the ingress replicas (Serve replica actors of the ingress deployment)."""
    return _rss_mb("ServeReplica:ingress")


def proxy_rss_mb() -> float:
    """RSS of Serve's HTTP proxy actor(s)."""
    return _rss_mb("ProxyActor")


def disk_mb(root: Path = STORE) -> float:
    total = 0
    for base, _dirs, files in os.walk(root):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += os.stat(os.path.join(base, name)).st_size
    return total / MB


class OrdinaryLoad:
    """Streaming chat completions at `rate` per second; TTFT (first content chunk) of each."""

    def __init__(self, host: str, rate: float) -> None:
        self.host = host
        self.rate = rate
        self.ttft_s: list[float] = []
        self.errors: Counter[str] = Counter()

    async def _one(self, session: aiohttp.ClientSession, i: int) -> None:
        body = {
            "model": MODEL,
            "messages": [{"role": "user", "content": f"ordinary question number {i}"}],
            "max_tokens": 16,
            "stream": True,
        }
        t0 = time.perf_counter()
        try:
            async with session.post(self.host + "/v1/chat/completions", json=body) as r:
                if r.status != 200:
                    self.errors[str(r.status)] += 1
                    return
                async for line in r.content:
                    if line.startswith(b"data: ") and b'"content"' in line:
                        self.ttft_s.append(time.perf_counter() - t0)
                        break
                async for _ in r.content:
                    pass
        except Exception as exc:
            self.errors[type(exc).__name__] += 1

    async def run(self, stop: asyncio.Event) -> None:
        tasks: list[asyncio.Task[None]] = []
        timeout = aiohttp.ClientTimeout(total=60)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            i = 0
            while not stop.is_set():
                tasks.append(asyncio.create_task(self._one(session, i)))
                i += 1
                await asyncio.sleep(1.0 / self.rate)
            await asyncio.gather(*tasks)

    def p99_ms(self) -> float | None:
        if len(self.ttft_s) < 2:
            return None
        return statistics.quantiles(self.ttft_s, n=100)[98] * 1e3


# raw HTTP -----------------------------------------------------------------------------------


async def raw_request(
    host: str,
    path: str,
    headers: dict[str, str],
    body: AsyncIterator[bytes],
    chunked: bool,
    answer_timeout_s: float = 120.0,
) -> tuple[str, int]:
    """Send a request whose body comes from `body` (chunked encoding or as is) while waiting
    for the answer; stop sending once answered. Returns (status, body bytes written)."""
    url = urlsplit(host)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    head = [f"POST {path} HTTP/1.1", f"Host: {url.netloc}", "Connection: close"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    if chunked:
        head.append("Transfer-Encoding: chunked")
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
    sent = 0

    async def send() -> None:
        nonlocal sent
        async for piece in body:
            writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n" if chunked else piece)
            await writer.drain()
            sent += len(piece)
        if chunked:
            writer.write(b"0\r\n\r\n")
            await writer.drain()

    sender = asyncio.create_task(send())
    try:
        line = await asyncio.wait_for(reader.readline(), answer_timeout_s)
        status = line.split()[1].decode() if line.startswith(b"HTTP/") else "no answer"
    except (TimeoutError, ConnectionError) as exc:
        status = type(exc).__name__
    finally:
        sender.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError, OSError):
            await sender
        writer.close()
    return status, sent


def _multipart_head(purpose: str = "batch") -> bytes:
    return (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\n{purpose}\r\n'
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; '
        f'filename="attack.jsonl"\r\nContent-Type: application/jsonl\r\n\r\n'
    ).encode()


def _upload_headers() -> dict[str, str]:
    return {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}


def _line(i: int, pad: int = 0) -> bytes:
    body = {"model": MODEL, "prompt": "p" * pad + f" {i}", "max_tokens": 256}
    return (
        json.dumps(
            {"custom_id": f"c{i}", "method": "POST", "url": "/v1/completions", "body": body}
        ).encode()
        + b"\n"
    )


async def _valid_lines(total_bytes: int, pad: int) -> AsyncIterator[bytes]:
    """A multipart head, then distinct valid request lines (~pad bytes each) in 256 KiB pieces
    up to total_bytes."""
    yield _multipart_head()
    sent, i = 0, 0
    while sent < total_bytes:
        piece = b"".join(_line(i + k, pad) for k in range(max(1, 256 * 1024 // pad)))
        i += max(1, 256 * 1024 // pad)
        sent += len(piece)
        yield piece


async def _repeat(head: bytes, piece: bytes, total_bytes: int) -> AsyncIterator[bytes]:
    yield head
    for _ in range(total_bytes // len(piece)):
        yield piece


# attacks ------------------------------------------------------------------------------------


async def upload_chunked_over_cap(host: str) -> str:
    """300 MB of valid 8 KB lines, chunked, to POST /v1/files (cap: 200 MB)."""
    status, sent = await raw_request(
        host, "/v1/files", _upload_headers(), _valid_lines(300 * MB, 8000), chunked=True
    )
    return f"{status} after {sent / MB:.0f} MB sent"


async def upload_declared_over_cap(host: str) -> str:
    """Content-Length of 300 MB on POST /v1/files, then the body."""
    headers = _upload_headers() | {"Content-Length": str(300 * MB)}
    status, sent = await raw_request(
        host, "/v1/files", headers, _repeat(_multipart_head(), b"x" * 65536, 300 * MB), False
    )
    return f"{status} after {sent / MB:.1f} MB sent"


async def batches_chunked_over_cap(host: str) -> str:
    """300 MB chunked JSON body to POST /v1/batches (cap: 64 KiB)."""
    body = _repeat(b'{"metadata": {"k": "', b"v" * 65536, 300 * MB)
    headers = {"Content-Type": "application/json"}
    status, sent = await raw_request(host, "/v1/batches", headers, body, chunked=True)
    return f"{status} after {sent / MB:.1f} MB sent"


async def upload_endless_line(host: str) -> str:
    """One 300 MB line without a newline, chunked, to POST /v1/files (line cap: 4 MiB)."""
    body = _repeat(_multipart_head() + b'{"custom_id": "', b"z" * 65536, 300 * MB)
    status, sent = await raw_request(host, "/v1/files", _upload_headers(), body, chunked=True)
    return f"{status} after {sent / MB:.1f} MB sent"


async def stalled_uploads(host: str, n: int = 12) -> str:
    """n uploads at once that send their head and then nothing (idle limit 30 s, 4 uploads
    at once per ingress replica)."""

    async def stall() -> AsyncIterator[bytes]:
        yield _multipart_head()
        await asyncio.Event().wait()

    answers = await asyncio.gather(
        *(raw_request(host, "/v1/files", _upload_headers(), stall(), True) for _ in range(n))
    )
    counts = Counter(status for status, _ in answers)
    return " + ".join(f"{s} x{c}" for s, c in sorted(counts.items()))


async def _json(
    session: aiohttp.ClientSession, method: str, url: str, **kw: Any
) -> tuple[int, Any]:
    async with session.request(method, url, **kw) as r:
        return r.status, await r.json(content_type=None)


async def _upload_small(session: aiohttp.ClientSession, host: str, lines: int) -> tuple[int, Any]:
    form = aiohttp.FormData()
    form.add_field("purpose", "batch")
    content = b"".join(_line(i, 100) for i in range(lines))
    form.add_field("file", content, filename="small.jsonl", content_type="application/jsonl")
    return await _json(session, "POST", host + "/v1/files", data=form)


async def file_count_cap(host: str, limit: int = 1_200) -> str:
    """Small uploads until refused (cap: 1,000 files per tenant); then every file deleted."""
    ids: list[str] = []
    answer = "never refused"
    async with aiohttp.ClientSession() as session:
        for _ in range(limit):
            status, body = await _upload_small(session, host, 1)
            if status != 200:
                answer = f"{status} {body['error']['code']} after {len(ids)} files"
                break
            ids.append(body["id"])
        deleted = Counter(
            [(await _json(session, "DELETE", f"{host}/v1/files/{f}"))[0] for f in ids]
        )
    return f"{answer}; deletes {dict(deleted)}"


async def open_batch_cap(host: str, limit: int = 150) -> str:
    """Batches of one 200-line file until refused (cap: 100 open batches per tenant); the
    file's DELETE while they are open; then every batch cancelled and the file deleted."""
    batch_ids: list[str] = []
    answer = "never refused"
    async with aiohttp.ClientSession() as session:
        status, file = await _upload_small(session, host, 200)
        assert status == 200, file
        create = {
            "input_file_id": file["id"],
            "endpoint": "/v1/completions",
            "completion_window": "24h",
        }
        for _ in range(limit):
            status, body = await _json(session, "POST", host + "/v1/batches", json=create)
            if status != 200:
                answer = f"{status} {body['error']['code']} after {len(batch_ids)} batches"
                break
            batch_ids.append(body["id"])
        in_use, _ = await _json(session, "DELETE", f"{host}/v1/files/{file['id']}")
        for b in batch_ids:
            await _json(session, "POST", f"{host}/v1/batches/{b}/cancel")
        for _ in range(120):
            statuses = [
                (await _json(session, "GET", f"{host}/v1/batches/{b}"))[1]["status"]
                for b in batch_ids
            ]
            if all(s == "cancelled" for s in statuses):
                break
            await asyncio.sleep(1.0)
        deleted, _ = await _json(session, "DELETE", f"{host}/v1/files/{file['id']}")
    return f"{answer}; DELETE in use {in_use}, after cancel {deleted}"


# tenant state --------------------------------------------------------------------------------

METRICS_URL = "http://127.0.0.1:8080/metrics"
"""`slomesh up`'s Prometheus export (its default --metrics-port)."""
TENANT_SERIES = (
    "ray_slomesh_tenant_virtual_tokens",
    "ray_slomesh_tenant_charged_tokens",
    "ray_slomesh_tenant_tokens_total",
)


def scheduler_rss_mb() -> float:
    """RSS of the scheduler replica."""
    return _rss_mb("ServeReplica:scheduler")


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
