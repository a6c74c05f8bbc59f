"""Moving Batch API bytes between the network and disk in pieces, with limits on size and time.

- `receive_body`: a request body's pieces as they arrive: 413 from Content-Length before
  reading, or the moment the pieces pass the limit (whatever the transfer encoding); 408 when
  no piece arrives for `idle_s` or the body has not ended `deadline_s` after the request began.
- `receive_upload`: a `POST /v1/files` body through `MultipartUpload` into a file under the
  store's uploads/ directory. The parsing, line validation and disk writes run in a worker
  thread, 256 KiB at a time, so the event loop keeps serving streams meanwhile.
- `file_response`: a stored file sent in pieces of 1 MiB, read in a worker thread (the file is
  opened first, so deleting it meanwhile does not cut the answer).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import BinaryIO

from fastapi import Request as HTTPRequest
from fastapi.responses import StreamingResponse

from services.ingress.core.batch_config import BatchConfig
from services.ingress.core.batch_errors import too_large, too_slow
from services.ingress.core.batch_upload import ENVELOPE_BYTES, MultipartUpload

PIECE_BYTES = 1024 * 1024
"""Largest piece sent of a stored file."""
FEED_BYTES = 256 * 1024
"""Upload bytes gathered before they go to the worker thread (parse, validate, write)."""


async def receive_body(
    request: HTTPRequest,
    limit_bytes: int,
    limit_field: str,
    idle_s: float,
    deadline_s: float,
) -> AsyncIterator[bytes]:
    """The body's pieces, within `limit_bytes` (named `limit_field` in the 413) and the time
    limits (408)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit_bytes:
        raise too_large(f"request body ({declared} bytes declared)", limit_bytes, limit_field)
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    pieces = request.stream().__aiter__()
    size = 0
    while True:
        left = end - loop.time()
        if left <= 0:
            raise too_slow("not complete within", deadline_s, "batch.upload_deadline_s") from None
        idle = idle_s <= left
        try:
            async with asyncio.timeout(idle_s if idle else left):
                piece = await anext(pieces)
        except StopAsyncIteration:
            return
        except TimeoutError:
            if idle:
                raise too_slow(
                    "nothing arrived for", idle_s, "batch.upload_idle_timeout_s"
                ) from None
            raise too_slow("not complete within", deadline_s, "batch.upload_deadline_s") from None
        size += len(piece)
        if size > limit_bytes:
            raise too_large("request body", limit_bytes, limit_field)
        if piece:
            yield piece


async def read_small_body(request: HTTPRequest, config: BatchConfig) -> bytes:
    """A whole JSON body of the Batch API, at most `max_create_body_bytes`."""
    parts = [
        piece
        async for piece in receive_body(
            request,
            config.max_create_body_bytes,
            "batch.max_create_body_bytes",
            config.upload_idle_timeout_s,
            config.upload_deadline_s,
        )
    ]
    return b"".join(parts)


def _close(out: BinaryIO, keep: bool) -> None:
    try:
        if keep:
            out.flush()
            os.fsync(out.fileno())
    finally:
        out.close()


async def receive_upload(request: HTTPRequest, path: Path, config: BatchConfig) -> MultipartUpload:
    """Receive an upload body into `path` (complete and validated when this returns; on any
    error the caller deletes `path`)."""
    out = await asyncio.to_thread(open, path, "wb")
    kept = False
    try:
        upload = MultipartUpload(request.headers.get("content-type"), out, config)
        pending = bytearray()
        async for piece in receive_body(
            request,
            config.max_file_bytes + ENVELOPE_BYTES,
            "batch.max_file_bytes + 64 KiB of multipart envelope",
            config.upload_idle_timeout_s,
            config.upload_deadline_s,
        ):
            pending += piece
            if len(pending) >= FEED_BYTES:
                await asyncio.to_thread(upload.feed, bytes(pending))
                pending.clear()
        await asyncio.to_thread(upload.feed, bytes(pending))
        await asyncio.to_thread(upload.finish)
        kept = True
    finally:
        await asyncio.to_thread(_close, out, kept)
    return upload


async def _pieces(f: BinaryIO) -> AsyncIterator[bytes]:
    try:
        while piece := await asyncio.to_thread(f.read, PIECE_BYTES):
            yield piece
    finally:
        await asyncio.to_thread(f.close)


async def file_response(path: Path) -> StreamingResponse | None:
    """The stored file at `path` as a streamed answer; None when it does not exist."""
    try:
        f: BinaryIO = await asyncio.to_thread(open, path, "rb")
    except FileNotFoundError:
        return None
    size = os.fstat(f.fileno()).st_size
    return StreamingResponse(
        _pieces(f),
        media_type="application/octet-stream",
        headers={"content-length": str(size)},
    )
