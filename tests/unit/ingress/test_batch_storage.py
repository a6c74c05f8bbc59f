"""Bounded Batch API state: per-tenant caps (429 naming the cap, per tenant), DELETE /v1/files
(OpenAI's shape; refused while an open batch reads the file), the retention sweep, output files
streamed to disk with the journal emptied, server faults retried a bounded number of times,
and every store call of the runner off the event loop's thread."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from batch_doubles import (
    FakeClock,
    ScriptedExecutor,
    batch_jsonl,
    new_batch,
    open_store,
    output_lines,
    runner,
)
from conftest import FakeMesh, build_ingress
from fastapi.testclient import TestClient

from services.ingress.batch_transfer import PIECE_BYTES, file_response
from services.ingress.core.batch_runner import ExecResult
from services.ingress.core.batch_store import BatchStore

KEYS = {"keys": {"key-a": {"tenant": "a"}, "key-b": {"tenant": "b"}}}
DAY = 86_400.0


@pytest.fixture
def clients(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[openai.OpenAI, openai.OpenAI, Any]]:
    limits = getattr(request, "param", {})
    app, instance = build_ingress(
        monkeypatch,
        FakeMesh(),
        api_keys=KEYS,
        batch={"storage_dir": str(tmp_path), "min_window_s": 1} | limits,
    )
    with TestClient(app, raise_server_exceptions=False) as http:
        yield (
            openai.OpenAI(
                base_url="http://testserver/v1", api_key="key-a", http_client=http, max_retries=0
            ),
            openai.OpenAI(
                base_url="http://testserver/v1", api_key="key-b", http_client=http, max_retries=0
            ),
            instance,
        )


def _upload(client: openai.OpenAI, n: int = 2) -> Any:
    return client.files.create(file=("in.jsonl", batch_jsonl(n)), purpose="batch")


def _batch(client: openai.OpenAI, file_id: str) -> Any:
    return client.batches.create(
        input_file_id=file_id, endpoint="/v1/completions", completion_window="1h"
    )


@pytest.mark.parametrize(
    ("clients", "fill", "cap", "code", "made"),
    [
        (
            {"max_files_per_tenant": 2},
            "files",
            "batch.max_files_per_tenant",
            "file_limit_exceeded",
            2,
        ),
        (
            {"max_stored_bytes_per_tenant": len(batch_jsonl(2)) + 1},
            "files",
            "batch.max_stored_bytes_per_tenant",
            "storage_limit_exceeded",
            1,
        ),
        (
            {"max_open_batches_per_tenant": 2},
            "batches",
            "batch.max_open_batches_per_tenant",
            "open_batch_limit_exceeded",
            2,
        ),
    ],
    indirect=["clients"],
    ids=["files", "bytes", "open-batches"],
)
def test_tenant_caps(
    clients: tuple[openai.OpenAI, openai.OpenAI, Any], fill: str, cap: str, code: str, made: int
) -> None:
    a, b, _ = clients
    file = _upload(a)
    create = (lambda: _upload(a)) if fill == "files" else (lambda: _batch(a, file.id))
    count = 1 if fill == "files" else 0
    with pytest.raises(openai.RateLimitError) as err:
        for _ in range(10):
            create()
            count += 1
    body = err.value.body
    assert isinstance(body, dict) and body["code"] == code and cap in body["message"]
    assert count == made
    # another tenant is not held by tenant a's use
    other = _upload(b)
    if fill == "batches":
        _batch(b, other.id)


def test_the_byte_cap_counts_what_was_stored(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Two uploads that each fit but together pass the cap: the second is refused in the
    transaction that stores it, and its part file is deleted."""
    size = len(batch_jsonl(3))
    app, _ = build_ingress(
        monkeypatch,
        FakeMesh(),
        batch={"storage_dir": str(tmp_path), "max_stored_bytes_per_tenant": size + size // 2},
    )
    with TestClient(app, raise_server_exceptions=False) as http:
        client = openai.OpenAI(
            base_url="http://testserver/v1", api_key="k", http_client=http, max_retries=0
        )
        client.files.create(file=("in.jsonl", batch_jsonl(3)), purpose="batch")
        with pytest.raises(openai.RateLimitError):
            client.files.create(file=("in.jsonl", batch_jsonl(3)), purpose="batch")
    assert len(list((tmp_path / "files").iterdir())) == 1
    assert not list((tmp_path / "uploads").iterdir())


def test_delete_file(clients: tuple[openai.OpenAI, openai.OpenAI, Any], tmp_path: Path) -> None:
    a, b, instance = clients
    file = _upload(a)
    batch = _batch(a, file.id)
    with pytest.raises(openai.ConflictError) as err:
        a.files.delete(file.id)
    assert isinstance(err.value.body, dict) and err.value.body["code"] == "file_in_use"
    with pytest.raises(openai.NotFoundError):
        b.files.delete(file.id)  # another tenant's file is not there for it
    asyncio.run(instance.batches.runner.run_batch(batch.id))
    done = a.batches.retrieve(batch.id)
    assert done.status == "completed" and done.output_file_id
    deleted = a.files.delete(file.id)
    assert (deleted.id, deleted.object, deleted.deleted) == (file.id, "file", True)
    assert not (tmp_path / "files" / file.id).exists()
    with pytest.raises(openai.NotFoundError):
        a.files.retrieve(file.id)
    with pytest.raises(openai.NotFoundError):
        a.files.delete(file.id)
    assert a.files.delete(done.output_file_id).deleted  # outputs can go too
    with pytest.raises(openai.NotFoundError):
        a.files.content(done.output_file_id)


@pytest.mark.parametrize(
    ("age_s", "open_batch", "kept"),
    [
        (0.0, False, True),  # not expired yet
        (31 * DAY, False, False),  # past its expires_at
        (31 * DAY, True, True),  # expired, but an open batch still reads it
    ],
    ids=["fresh", "expired", "expired-in-use"],
)
def test_sweep_deletes_expired_inputs(
    tmp_path: Path, age_s: float, open_batch: bool, kept: bool
) -> None:
    clock = FakeClock()
    store = open_store(tmp_path)
    row = store.create_file("t", "in.jsonl", "batch", batch_jsonl(2), clock(), clock() + 30 * DAY)
    if open_batch:
        store.create_batch({"tenant": "t"}, row["id"], "/v1/completions", "1h", 3600, None, 0)
    gone = store.sweep(clock() + age_s, batch_retention_s=30 * DAY, orphan_age_s=3600)
    assert (store.get_file(row["id"]) is not None) is kept
    assert store.file_path(row["id"]).exists() is kept
    assert gone["files"] == int(not kept)


def test_sweep_deletes_old_outputs_batches_and_orphans(tmp_path: Path) -> None:
    clock = FakeClock()
    store = BatchStore(tmp_path / "store", output_retention_s=DAY)
    batch_id = new_batch(store, 3, clock)
    asyncio.run(runner(store, ScriptedExecutor(clock), clock).run_batch(batch_id))
    done = store.get_batch(batch_id)
    assert done is not None and done["output_file_id"]
    output = done["output_file_id"]
    orphan = store.files_dir / "file-orphan"
    orphan.write_bytes(b"left by a crash")
    part = store.upload_path()
    part.write_bytes(b"an interrupted upload")
    old = clock() - 2 * 3600
    for path in (orphan, part):
        os.utime(path, (old, old))
    store.sweep(clock(), batch_retention_s=30 * DAY, orphan_age_s=3600)
    assert not orphan.exists() and not part.exists()
    assert store.get_file(output) is not None  # a day has not passed
    store.sweep(clock() + 2 * DAY, batch_retention_s=30 * DAY, orphan_age_s=3600)
    assert store.get_file(output) is None and not store.file_path(output).exists()
    assert store.get_batch(batch_id) is not None  # the batch row is kept longer
    store.sweep(clock() + 31 * DAY, batch_retention_s=30 * DAY, orphan_age_s=3600)
    assert store.get_batch(batch_id) is None


def test_outputs_are_files_and_the_journal_is_emptied(tmp_path: Path) -> None:
    clock = FakeClock()
    store = open_store(tmp_path)
    batch_id = new_batch(store, 30, clock)
    asyncio.run(runner(store, ScriptedExecutor(clock), clock).run_batch(batch_id))
    lines = output_lines(store, batch_id, "output_file_id")
    assert [x["custom_id"] for x in lines] == [f"r{i}" for i in range(30)]
    rows = store._db.execute("SELECT COUNT(*) FROM requests WHERE batch_id = ?", (batch_id,))
    assert rows.fetchone()[0] == 0
    assert store.counts(batch_id) == {"total": 30, "completed": 30, "failed": 0}
    blobs = store._db.execute("SELECT MAX(LENGTH(result)) FROM requests").fetchone()[0]
    assert blobs is None  # no value holds an output


def test_file_content_is_sent_in_pieces(tmp_path: Path) -> None:
    path = tmp_path / "big"
    path.write_bytes(os.urandom(PIECE_BYTES * 2 + 123))

    async def pieces() -> list[bytes]:
        response = await file_response(path)
        assert response is not None
        assert response.headers["content-length"] == str(PIECE_BYTES * 2 + 123)
        path.unlink()  # deleting it meanwhile does not cut the answer
        return [bytes(p) async for p in response.body_iterator]  # type: ignore[arg-type]

    got = asyncio.run(pieces())
    assert [len(p) for p in got] == [PIECE_BYTES, PIECE_BYTES, 123]


FAULT = ExecResult(500, {"error": {"message": "replica replica-0 failed mid-request"}})


@pytest.mark.parametrize(
    ("faulty_attempts", "outcome", "calls"),
    [(0, "completed", 1), (2, "completed", 3), (5, "failed", 3)],
    ids=["no-fault", "two-faults-then-ok", "faults-every-time"],
)
def test_server_faults_are_retried_a_bounded_number_of_times(
    tmp_path: Path, faulty_attempts: int, outcome: str, calls: int
) -> None:
    clock = FakeClock()
    store = open_store(tmp_path)

    def script(custom_id: str, attempt: int) -> ExecResult | None:
        return FAULT if attempt <= faulty_attempts else None

    executor = ScriptedExecutor(clock, script)
    batch_id = new_batch(store, 4, clock)
    asyncio.run(runner(store, executor, clock, max_fault_attempts=3).run_batch(batch_id))
    row = store.get_batch(batch_id)
    assert row is not None and row["status"] == "completed"  # the batch itself finishes
    column = "output_file_id" if outcome == "completed" else "error_file_id"
    lines = output_lines(store, batch_id, column)
    assert len(lines) == 4 and all(executor.calls[f"r{i}"] == calls for i in range(4))
    if outcome == "failed":
        assert all(x["response"]["status_code"] == 500 for x in lines)


class _Raising(ScriptedExecutor):
    async def execute(self, request: Any) -> ExecResult:
        if self.calls[request.custom_id] == 0:
            self.calls[request.custom_id] += 1
            raise ConnectionResetError("replica gone")
        return await super().execute(request)


def test_an_executor_exception_is_a_retried_fault(tmp_path: Path) -> None:
    clock = FakeClock()
    store = open_store(tmp_path)
    batch_id = new_batch(store, 3, clock)
    asyncio.run(runner(store, _Raising(clock), clock).run_batch(batch_id))
    assert store.counts(batch_id) == {"total": 3, "completed": 3, "failed": 0}


class _ThreadRecordingStore(BatchStore):
    """Records the thread of every public store call."""

    threads: set[int]

    def __getattribute__(self, name: str) -> Any:
        value = super().__getattribute__(name)
        if callable(value) and not name.startswith("_") and name != "threads":

            def call(*args: Any, **kwargs: Any) -> Any:
                super(_ThreadRecordingStore, self).__getattribute__("threads").add(
                    threading.get_ident()
                )
                return value(*args, **kwargs)

            return call
        return value


def test_the_runner_never_touches_sqlite_on_the_event_loop(tmp_path: Path) -> None:
    clock = FakeClock()
    plain = open_store(tmp_path)
    batch_id = new_batch(plain, 5, clock)
    store = _ThreadRecordingStore(tmp_path / "store")
    store.threads = set()
    loop_threads: set[int] = set()

    async def run() -> None:
        loop_threads.add(threading.get_ident())
        r = runner(store, ScriptedExecutor(clock), clock)
        await r.poll_once()
        await asyncio.gather(*r._running.values())
        await r.sweep_if_due()

    asyncio.run(run())
    assert plain.get_batch(batch_id)["status"] == "completed"  # type: ignore[index]
    assert store.threads and not store.threads & loop_threads


def test_output_lines_are_json(tmp_path: Path) -> None:
    """Each output line is one JSON object (written line by line, never joined)."""
    clock = FakeClock()
    store = open_store(tmp_path)
    batch_id = new_batch(store, 5, clock)
    asyncio.run(runner(store, ScriptedExecutor(clock), clock).run_batch(batch_id))
    row = store.get_batch(batch_id)
    assert row is not None
    raw = store.file_path(row["output_file_id"]).read_bytes()
    assert raw.endswith(b"\n") and all(json.loads(x) for x in raw.splitlines())
