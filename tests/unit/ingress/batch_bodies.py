"""Hostile request bodies for the Batch API's handlers: an ASGI `receive` that hands out pieces
lazily (endless, stalling or trickling) and counts what the server pulled, and a Starlette
request over it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from typing import Any

from starlette.requests import Request

BOUNDARY = "slomeshtestboundary"
PIECE = 64 * 1024


def multipart(content: bytes, purpose: str = "batch", filename: str = "in.jsonl") -> bytes:
    """A whole multipart/form-data body: `purpose` first (as the openai client sends it)."""
    return b"".join(
        [
            f"--{BOUNDARY}\r\n".encode(),
            b'Content-Disposition: form-data; name="purpose"\r\n\r\n',
            purpose.encode() + b"\r\n",
            f"--{BOUNDARY}\r\n".encode(),
            f'Content-Disposition: form-data; name="file"; filename="{filename}"\r\n'.encode(),
            b"Content-Type: application/jsonl\r\n\r\n",
            content,
            f"\r\n--{BOUNDARY}--\r\n".encode(),
        ]
    )


def endless_file(line: bytes) -> Iterator[bytes]:
    """A multipart body whose file part never ends: `line` repeated forever, in pieces."""
    head = multipart(b"")[: -len(f"\r\n--{BOUNDARY}--\r\n")]
    yield head
    per_piece = max(1, PIECE // len(line))
    while True:
        yield line * per_piece


def pieces_of(data: bytes, size: int = PIECE) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


class Body:
    """ASGI receive over `pieces` (a piece of None stalls for ever); `delay_s` before each
    piece. `pulled` counts the body bytes the server asked for."""

    def __init__(self, pieces: Iterable[bytes | None], delay_s: float = 0.0) -> None:
        self._pieces = iter(pieces)
        self._next = next(self._pieces, b"")
        self.delay_s = delay_s
        self.pulled = 0

    async def __call__(self) -> dict[str, Any]:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        piece = self._next
        if piece is None:
            await asyncio.Event().wait()
        assert piece is not None
        self._next = next(self._pieces, b"") if piece else b""
        self.pulled += len(piece)
        return {"type": "http.request", "body": piece, "more_body": self._next != b""}


def request(
    path: str, body: Body, headers: dict[str, str] | None = None, method: str = "POST"
) -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "query_string": b"",
        "headers": raw,
    }
    return Request(scope, body)  # type: ignore[arg-type]


def upload_headers(length: int | None = None, key: str | None = None) -> dict[str, str]:
    headers = {"content-type": f"multipart/form-data; boundary={BOUNDARY}"}
    if length is not None:
        headers["content-length"] = str(length)
    if key is not None:
        headers["authorization"] = f"Bearer {key}"
    return headers
