"""Hostile-client attacks on the Batch API's uploads and caps, and the ordinary streaming load
that runs beside every attack (`loadtest/hostile.py` runs them). Attack bodies are written on
raw sockets while the response is awaited: the attacker stops once it is answered."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp

MODEL = "llama-3.1-8b"
MB = 1024 * 1024
BOUNDARY = "hostileboundary"
STORE = Path("~/.cache/slomesh/batches").expanduser()


# measuring ----------------------------------------------------------------------------------


def rss_mb(marker: str) -> float:
    out = subprocess.run(["ps", "-eo", "rss,args"], capture_output=True, text=True).stdout
    return sum(int(ln.split()[0]) for ln in out.splitlines()[1:] if marker in ln) / 1024


def ingress_rss_mb() -> float:
    """RSS of the ingress replicas (Serve replica actors of the ingress deployment)."""
    return rss_mb("ServeReplica:ingress")


def proxy_rss_mb() -> float:
    """RSS of Serve's HTTP proxy actor(s)."""
    return rss_mb("ProxyActor")


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
