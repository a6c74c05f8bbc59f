"""The Batch API's embedded store: one SQLite file (stdlib `sqlite3`, WAL) and a directory of
file contents, on local disk.

- `files` rows (id, tenant, name, purpose, bytes, expires_at); each file's content is the file
  `files/<id>` beside the database, written in pieces (uploads stream to `uploads/` first and
  are renamed in; output files are written line by line from the journal), so no value and no
  string in memory ever holds a whole file.
- `batches` rows: status, timestamps, errors, output/error file ids, and the request counts
  once final.
- `requests`, the journal, and `leases`: `core/batch_journal.py`.

Every multi-row change is one transaction (`BEGIN IMMEDIATE`), so a crash leaves either the old
or the new state; a crash between writing a content file and committing its row leaves an
orphan file that `sweep` deletes. Per-tenant caps are checked inside the transaction that adds
a file or a batch (`CapExceeded`), so concurrent uploads to several replicas cannot pass them
together. Time comes from the caller (`now`, seconds since the epoch). The methods are
synchronous: callers on an event loop run them on the store's own thread (`StoreThread`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from services.ingress.core.batch_journal import ACTIVE, FINAL, Journal, request_uid

__all__ = ["ACTIVE", "FINAL", "BatchStore", "CapExceeded", "request_uid"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, tenant TEXT NOT NULL,
    filename TEXT NOT NULL, purpose TEXT NOT NULL, bytes INTEGER NOT NULL,
    created_at REAL NOT NULL, expires_at REAL
);
CREATE INDEX IF NOT EXISTS files_tenant ON files (tenant);
CREATE TABLE IF NOT EXISTS batches (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, tenant TEXT NOT NULL,
    principal TEXT NOT NULL, endpoint TEXT NOT NULL,
    input_file_id TEXT NOT NULL, completion_window TEXT NOT NULL, window_s REAL NOT NULL,
    status TEXT NOT NULL, errors TEXT, output_file_id TEXT, error_file_id TEXT, metadata TEXT,
    created_at REAL NOT NULL, in_progress_at REAL, expires_at REAL, finalizing_at REAL,
    completed_at REAL, failed_at REAL, expired_at REAL, cancelling_at REAL, cancelled_at REAL,
    count_total INTEGER, count_completed INTEGER, count_failed INTEGER
);
CREATE INDEX IF NOT EXISTS batches_tenant ON batches (tenant, status);
CREATE INDEX IF NOT EXISTS batches_input ON batches (input_file_id, status);
"""
_FINISHED_AT = "COALESCE(completed_at, failed_at, expired_at, cancelled_at)"


class CapExceeded(Exception):
    """A per-tenant cap would be passed: `cap` names the config field, `limit` its value,
    `current` the tenant's use."""

    def __init__(self, cap: str, limit: int, current: int) -> None:
        super().__init__(f"{cap}: {current} of {limit}")
        self.cap = cap
        self.limit = limit
        self.current = current


class BatchStore(Journal):
    """Files, batches, the request journal and run leases: SQLite plus content files."""

    def __init__(self, directory: str | Path, output_retention_s: float = 30 * 86_400.0) -> None:
        root = Path(directory).expanduser()
        self.files_dir = root / "files"
        self.uploads_dir = root / "uploads"
        self.files_dir.mkdir(parents=True, exist_ok=True)
        self.uploads_dir.mkdir(parents=True, exist_ok=True)
        self.output_retention_s = output_retention_s
        self.path = root / "batches-v2.sqlite3"
        # one connection per store, used by one thread at a time (StoreThread); every method
        # is synchronous, so no transaction spans an await
        self._db = sqlite3.connect(
            self.path, timeout=30.0, isolation_level=None, check_same_thread=False
        )
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        self._db.executescript(self.JOURNAL_SCHEMA)

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _one(self, sql: str, args: Sequence[Any]) -> dict[str, Any] | None:
        row = self._db.execute(sql, args).fetchone()
        return dict(row) if row is not None else None

    # files ---------------------------------------------------------------------------------

    def upload_path(self) -> Path:
        """A fresh path under `uploads/` for an upload being received."""
        return self.uploads_dir / f"{uuid.uuid4().hex}.part"

    def file_path(self, file_id: str) -> Path:
        return self.files_dir / file_id

    def usage(self, tenant: str) -> tuple[int, int]:
        """(bytes, files) a tenant stores."""
        row = self._db.execute(
            "SELECT COALESCE(SUM(bytes), 0), COUNT(*) FROM files WHERE tenant = ?", (tenant,)
        ).fetchone()
        return int(row[0]), int(row[1])

    def add_file(
        self,
        tenant: str,
        filename: str,
        purpose: str,
        source: Path,
        now: float,
        expires_at: float | None,
        max_bytes: int | None = None,
        max_files: int | None = None,
    ) -> dict[str, Any]:
        """Store the finished upload at `source` (moved in) as a new file; CapExceeded (and
        `source` left where it is) when the tenant's stored bytes would pass `max_bytes` or
        its file count `max_files`."""
        size = source.stat().st_size
        file_id = "file-" + uuid.uuid4().hex[:24]
        target = self.file_path(file_id)
        with self._tx() as db:
            stored, count = self.usage(tenant)
            if max_files is not None and count + 1 > max_files:
                raise CapExceeded("batch.max_files_per_tenant", max_files, count)
            if max_bytes is not None and stored + size > max_bytes:
                raise CapExceeded("batch.max_stored_bytes_per_tenant", max_bytes, stored)
            os.replace(source, target)
            try:
                db.execute(
                    "INSERT INTO files (id, tenant, filename, purpose, bytes, created_at, "
                    "expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (file_id, tenant, filename, purpose, size, now, expires_at),
                )
            except BaseException:
                target.unlink(missing_ok=True)
                raise
        row = self.get_file(file_id)
        assert row is not None
        return row

    def create_file(
        self,
        tenant: str,
        filename: str,
        purpose: str,
        content: bytes,
        now: float,
        expires_at: float | None = None,
    ) -> dict[str, Any]:
        """Store small content given whole (tests and tools; uploads use `add_file`)."""
        source = self.upload_path()
        source.write_bytes(content)
        try:
            return self.add_file(tenant, filename, purpose, source, now, expires_at)
        finally:
            source.unlink(missing_ok=True)

    def get_file(self, file_id: str) -> dict[str, Any] | None:
        return self._one("SELECT * FROM files WHERE id = ?", (file_id,))

    def delete_file(self, file_id: str, tenant: str) -> str:
        """Delete a tenant's file: "deleted", "missing" (no such file of this tenant), or
        "in_use" (an open batch reads it: kept)."""
        with self._tx() as db:
            row = db.execute("SELECT tenant FROM files WHERE id = ?", (file_id,)).fetchone()
            if row is None or row[0] != tenant:
                return "missing"
            marks = ",".join("?" * len(ACTIVE))
            used = db.execute(
                f"SELECT 1 FROM batches WHERE input_file_id = ? AND status IN ({marks}) LIMIT 1",
                (file_id, *ACTIVE),
            ).fetchone()
            if used is not None:
                return "in_use"
            db.execute("DELETE FROM files WHERE id = ?", (file_id,))
        self.file_path(file_id).unlink(missing_ok=True)
        return "deleted"

    def sweep(self, now: float, batch_retention_s: float, orphan_age_s: float) -> dict[str, int]:
        """Delete expired files (not while an open batch reads them), final batches finished
        more than `batch_retention_s` ago, and content or upload files older than
        `orphan_age_s` that no row names (a crash mid-upload or mid-finalize). Returns how
        many of each went."""
        marks = ",".join("?" * len(ACTIVE))
        with self._tx() as db:
            expired = [
                r[0]
                for r in db.execute(
                    "SELECT id FROM files WHERE expires_at IS NOT NULL AND expires_at <= ? "
                    f"AND id NOT IN (SELECT input_file_id FROM batches WHERE status IN ({marks}))",
                    (now, *ACTIVE),
                ).fetchall()
            ]
            db.executemany("DELETE FROM files WHERE id = ?", [(f,) for f in expired])
            cur = db.execute(
                f"DELETE FROM batches WHERE status IN ({','.join('?' * len(FINAL))}) "
                f"AND {_FINISHED_AT} <= ?",
                (*FINAL, now - batch_retention_s),
            )
            batches = cur.rowcount
        for file_id in expired:
            self.file_path(file_id).unlink(missing_ok=True)
        orphans = 0
        for directory in (self.files_dir, self.uploads_dir):
            for path in directory.iterdir():
                with contextlib.suppress(FileNotFoundError):
                    if now - path.stat().st_mtime < orphan_age_s:
                        continue
                    if directory is self.files_dir and self.get_file(path.name) is not None:
                        continue
                    path.unlink()
                    orphans += 1
        return {"files": len(expired), "batches": batches, "orphans": orphans}

    # batches -------------------------------------------------------------------------------

    def create_batch(
        self,
        principal: dict[str, Any],
        input_file_id: str,
        endpoint: str,
        window: str,
        window_s: float,
        metadata: dict[str, str] | None,
        now: float,
        max_open: int | None = None,
    ) -> dict[str, Any]:
        """A new batch in `validating`; CapExceeded when the tenant already has `max_open`
        batches that are not final."""
        batch_id = "batch_" + uuid.uuid4().hex[:24]
        tenant = principal["tenant"]
        with self._tx() as db:
            if max_open is not None:
                marks = ",".join("?" * len(ACTIVE))
                row = db.execute(
                    f"SELECT COUNT(*) FROM batches WHERE tenant = ? AND status IN ({marks})",
                    (tenant, *ACTIVE),
                ).fetchone()
                if int(row[0]) >= max_open:
                    raise CapExceeded("batch.max_open_batches_per_tenant", max_open, int(row[0]))
            db.execute(
                "INSERT INTO batches (id, tenant, principal, endpoint, input_file_id, "
                "completion_window, window_s, status, metadata, created_at, expires_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, 'validating', ?, ?, ?)",
                (
                    batch_id,
                    tenant,
                    json.dumps(principal),
                    endpoint,
                    input_file_id,
                    window,
                    window_s,
                    json.dumps(metadata) if metadata else None,
                    now,
                    now + window_s,
                ),
            )
        row = self.get_batch(batch_id)
        assert row is not None
        return row

    def get_batch(self, batch_id: str) -> dict[str, Any] | None:
        return self._one("SELECT * FROM batches WHERE id = ?", (batch_id,))

    def list_batches(
        self, tenant: str, after: str | None, limit: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """A tenant's batches, newest first; `after` is the id of the last batch of the
        previous page."""
        start = None
        if after is not None:
            row = self._one("SELECT seq FROM batches WHERE id = ?", (after,))
            start = row["seq"] if row else None
        rows = self._db.execute(
            "SELECT * FROM batches WHERE tenant = ? AND seq < ? ORDER BY seq DESC LIMIT ?",
            (tenant, start if start is not None else 2**62, limit + 1),
        ).fetchall()
        return [dict(r) for r in rows[:limit]], len(rows) > limit

    def active_batch_ids(self) -> list[str]:
        marks = ",".join("?" * len(ACTIVE))
        rows = self._db.execute(
            f"SELECT id FROM batches WHERE status IN ({marks}) ORDER BY seq", ACTIVE
        ).fetchall()
        return [r[0] for r in rows]

    def request_cancel(self, batch_id: str, now: float) -> str | None:
        """Move an active batch to `cancelling`; returns its status before (None: unknown id)."""
        with self._tx() as db:
            row = db.execute("SELECT status FROM batches WHERE id = ?", (batch_id,)).fetchone()
            if row is None:
                return None
            if row[0] in ("validating", "in_progress", "finalizing"):
                db.execute(
                    "UPDATE batches SET status = 'cancelling', cancelling_at = ? WHERE id = ?",
                    (now, batch_id),
                )
            return str(row[0])

    def fail_validation(self, batch_id: str, errors: list[dict[str, Any]], now: float) -> None:
        self._db.execute(
            "UPDATE batches SET status = 'failed', failed_at = ?, errors = ?, count_total = 0, "
            "count_completed = 0, count_failed = 0 "
            "WHERE id = ? AND status IN ('validating', 'cancelling')",
            (now, json.dumps(errors), batch_id),
        )

    def set_finalizing(self, batch_id: str, now: float) -> None:
        self._db.execute(
            "UPDATE batches SET status = 'finalizing', finalizing_at = ? "
            "WHERE id = ? AND status = 'in_progress'",
            (now, batch_id),
        )
