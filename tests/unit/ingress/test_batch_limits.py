"""The Batch API's limits, enforced while bodies are read: each hostile body goes to the
handler through an ASGI receive that counts the bytes the server pulled, so "413 at the cap,
nothing read past it" is checked, not assumed; no partial upload is left on disk; the
concurrent-upload cap answers 429 before a body is read."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from batch_bodies import (
    PIECE,
    Body,
    endless_file,
    multipart,
    pieces_of,
    request,
    upload_headers,
)
from batch_doubles import batch_jsonl
from conftest import FakeMesh, build_ingress

from services.ingress.batch_transfer import FEED_BYTES
from services.ingress.core.errors import APIError

LIMITS = {
    "max_file_bytes": 256 * 1024,
    "max_line_bytes": 8 * 1024,
    "max_requests_per_batch": 50,
    "max_create_body_bytes": 2048,
    "upload_idle_timeout_s": 0.2,
    "upload_deadline_s": 1.0,
}
UNTIMED = {"upload_idle_timeout_s": 60.0, "upload_deadline_s": 120.0}
"""For the cases a size or content rule decides: no time limit may answer first on a loaded host."""
LINE = batch_jsonl(1).replace(b'"r0"', b'"x"')  # one valid line; custom_ids repeat (dup: 400)


def _api(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **limits: Any) -> Any:
    _, instance = build_ingress(
        monkeypatch, FakeMesh(), batch={"storage_dir": str(tmp_path)} | LIMITS | limits
    )
    return instance.batches


def _lines(n: int | None = None, pad: int = 0) -> Iterator[bytes]:
    """Distinct valid request lines (prompts `pad` characters longer): n, or for ever."""
    for i in itertools.count() if n is None else range(n):
        line = batch_jsonl(1).replace(b'"r0"', f'"id{i}"'.encode())
        yield line.replace(b'"prompt 0"', b'"prompt ' + b"p" * pad + b'"')


def _file_part(lines: Iterable[bytes]) -> Iterator[bytes]:
    """A multipart body whose file part is `lines`, one piece each (no closing boundary when
    they never end)."""
    yield HEAD
    yield from lines


def _endless(piece: bytes) -> Iterator[bytes]:
    while True:
        yield piece


HEAD = multipart(b"")[: -len(b"\r\n--slomeshtestboundary--\r\n")]
CAP = LIMITS["max_file_bytes"]
SLACK = FEED_BYTES + 2 * PIECE  # gathered for the worker thread + the piece in hand
CASES: list[tuple[str, Callable[[], Body], dict[str, str], int, str, int]] = [
    # name, body, headers, status, error param (or code), most body bytes the server may pull
    (
        "chunked-over-cap",
        lambda: Body(_file_part(_lines(pad=6000))),  # 6 KB lines: the size cap comes first
        upload_headers(),
        413,
        "file",
        CAP + SLACK,
    ),
    (
        "declared-over-cap",
        lambda: Body(pieces_of(multipart(b"x" * (CAP + 70_000)))),
        upload_headers(length=CAP + 70_500),
        413,
        "request_too_large",
        0,
    ),
    (
        "lying-length",
        lambda: Body(_file_part(_lines(pad=6000))),
        upload_headers(length=1000),
        413,
        "file",
        CAP + SLACK,
    ),
    (
        "endless-line",
        lambda: Body(endless_file(b"y" * 4096)),
        upload_headers(),
        400,
        "line 1",
        LIMITS["max_line_bytes"] + SLACK,
    ),
    ("too-many-lines", lambda: Body(_file_part(_lines())), upload_headers(), 400, "file", SLACK),
    (
        "duplicate-custom-id",
        lambda: Body(_file_part(_endless(LINE))),
        upload_headers(),
        400,
        "line 2: custom_id",
        SLACK,
    ),
    (
        "wrong-purpose",
        lambda: Body(pieces_of(multipart(LINE * 1000, purpose="fine-tune"))),
        upload_headers(),
        400,
        "purpose",
        SLACK,
    ),
    (
        "not-multipart",
        lambda: Body(_endless(b"{}" * 1000)),
        {"content-type": "application/json"},
        400,
        "file",
        0,
    ),
    ("stalled", lambda: Body([HEAD, None]), upload_headers(), 408, "request_timeout", len(HEAD)),
    (
        "trickle-past-deadline",
        lambda: Body(_file_part(_lines()), delay_s=0.05),
        upload_headers(),
        408,
        "request_timeout",
        len(HEAD) + LIMITS["max_requests_per_batch"] * len(LINE),
    ),
]


@pytest.mark.parametrize(
    ("make_body", "headers", "status", "param", "most_pulled"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_upload_limits_while_reading(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    make_body: Callable[[], Body],
    headers: dict[str, str],
    status: int,
    param: str,
    most_pulled: int,
) -> None:
    api = _api(monkeypatch, tmp_path, **({} if status == 408 else UNTIMED))
    body = make_body()
    with pytest.raises(APIError) as err:
        asyncio.run(api.upload(request("/v1/files", body, headers)))
    assert err.value.status == status, err.value.message
    assert param in f"{err.value.param} {err.value.code}", err.value.body()
    assert body.pulled <= most_pulled
    assert not list((tmp_path / "uploads").iterdir())  # no partial upload left
    assert not list((tmp_path / "files").iterdir())
    assert api.uploads == 0


@pytest.mark.parametrize(
    ("pieces", "headers", "status", "most_pulled"),
    [
        (_endless(b"{" + b" " * 1000), {}, 413, LIMITS["max_create_body_bytes"] + 1001),
        ([b"{}"], {"content-length": "999999"}, 413, 0),
        ([b'{"input_file_id": "file-', None], {}, 408, 100),
    ],
    ids=["chunked-over-cap", "declared-over-cap", "stalled"],
)
def test_create_batch_body_limits(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    pieces: Iterable[bytes | None],
    headers: dict[str, str],
    status: int,
    most_pulled: int,
) -> None:
    api = _api(monkeypatch, tmp_path)
    body = Body(pieces)
    with pytest.raises(APIError) as err:
        asyncio.run(api.create_batch(request("/v1/batches", body, headers)))
    assert err.value.status == status, err.value.message
    assert body.pulled <= most_pulled


def test_a_valid_upload_streams_to_its_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    api = _api(monkeypatch, tmp_path)
    content = b"".join(_lines(40))
    body = Body(pieces_of(multipart(content), 1000))  # many small pieces
    row = asyncio.run(api.upload(request("/v1/files", body, upload_headers())))
    assert row["bytes"] == len(content) and row["purpose"] == "batch"
    assert (tmp_path / "files" / row["id"]).read_bytes() == content
    assert row["expires_at"] == pytest.approx(row["created_at"] + 30 * 86_400, abs=2)


def test_concurrent_uploads_past_the_cap_are_429_before_reading(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # the held upload must outlive the whole scenario on a loaded machine: no time limit decides it
    api = _api(
        monkeypatch,
        tmp_path,
        max_concurrent_uploads=1,
        upload_idle_timeout_s=60.0,
        upload_deadline_s=120.0,
    )

    async def scenario() -> tuple[APIError, Body]:
        stalled = Body([multipart(b"")[:50], None])
        first = asyncio.create_task(api.upload(request("/v1/files", stalled, upload_headers())))
        while stalled.pulled == 0:
            await asyncio.sleep(0.001)
        second_body = Body(pieces_of(multipart(LINE)))
        with pytest.raises(APIError) as second:
            await api.upload(request("/v1/files", second_body, upload_headers()))
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        third = Body(pieces_of(multipart(LINE)))
        await api.upload(request("/v1/files", third, upload_headers()))  # the slot is free again
        return second.value, second_body

    refused, body = asyncio.run(scenario())
    assert refused.status == 429 and refused.code == "too_many_uploads"
    assert "batch.max_concurrent_uploads" in refused.message and refused.retry_after_s
    assert body.pulled == 0
    assert api.uploads == 0
