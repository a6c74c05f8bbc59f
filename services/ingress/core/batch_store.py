"""The Batch API's embedded store: one SQLite file (stdlib `sqlite3`, WAL) on local disk.

Tables:
- `files`: uploads and the output/error files the runner writes (content as a BLOB).
- `batches`: one row per batch: status, timestamps, errors, output/error file ids.
- `requests`: the journal, one row per request line, keyed by (batch_id, custom_id), the
  request's idempotent id. `state` goes pending -> started (claimed by the lease holder) ->
  done; `finish` writes the result line only while the row is `started` (UPDATE ... WHERE
  state = 'started'), so a result is written exactly once. A row left `started` by a crash is
  put back to pending by the next lease holder (`resume`) and runs again: its first attempt
  never finished (the engine aborted it when the ingress's stream was cut).
- `leases`: (batch_id, owner, expires_at): only the owner of an unexpired lease runs a batch,
  so with several ingress replicas exactly one runs each batch; a dead owner's lease lapses
  after `lease_ttl_s` and another replica takes the batch over.

Every multi-row change is one transaction (`BEGIN IMMEDIATE`), so a crash leaves either the old
or the new state. Time comes from the caller (`now`, seconds since the epoch).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from services.ingress.core.batch_files import BatchLine

ACTIVE = ("validating", "in_progress", "finalizing", "cancelling")
FINAL = ("completed", "failed", "expired", "cancelled")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, tenant TEXT NOT NULL,
    filename TEXT NOT NULL, purpose TEXT NOT NULL, bytes INTEGER NOT NULL,
    created_at REAL NOT NULL, content BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS batches (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, tenant TEXT NOT NULL,
    principal TEXT NOT NULL, endpoint TEXT NOT NULL,
    input_file_id TEXT NOT NULL, completion_window TEXT NOT NULL, window_s REAL NOT NULL,
    status TEXT NOT NULL, errors TEXT, output_file_id TEXT, error_file_id TEXT, metadata TEXT,
    created_at REAL NOT NULL, in_progress_at REAL, expires_at REAL, finalizing_at REAL,
    completed_at REAL, failed_at REAL, expired_at REAL, cancelling_at REAL, cancelled_at REAL
);
CREATE TABLE IF NOT EXISTS requests (
    batch_id TEXT NOT NULL, custom_id TEXT NOT NULL, line INTEGER NOT NULL, url TEXT NOT NULL,
    body TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'pending', outcome TEXT, result TEXT,
    attempts INTEGER NOT NULL DEFAULT 0, retries INTEGER NOT NULL DEFAULT 0,
    not_before REAL NOT NULL DEFAULT 0, started_at REAL, finished_at REAL,
    PRIMARY KEY (batch_id, custom_id)
);
CREATE INDEX IF NOT EXISTS requests_state ON requests (batch_id, state, line);
CREATE TABLE IF NOT EXISTS leases (
    batch_id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at REAL NOT NULL
);
"""


def request_uid(batch_id: str, custom_id: str) -> str:
    """The idempotent id of a batch request (the same on every attempt and after a restart)."""
    return hashlib.sha256(f"{batch_id}\0{custom_id}".encode()).hexdigest()[:24]


class BatchStore:
    """Files, batches, the request journal and run leases in one SQLite file."""

    def __init__(self, directory: str | Path) -> None:
        path = Path(directory).expanduser()
        path.mkdir(parents=True, exist_ok=True)
        self.path = path / "batches.sqlite3"
        # one connection per store, used from one event loop at a time (every method is
        # synchronous: no transaction spans an await); the loop's thread may change
        self._db = sqlite3.connect(
            self.path, timeout=30.0, isolation_level=None, check_same_thread=False
        )
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)

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

    def create_file(
        self, tenant: str, filename: str, purpose: str, content: bytes, now: float
    ) -> dict[str, Any]:
        file_id = "file-" + uuid.uuid4().hex[:24]
        self._db.execute(
            "INSERT INTO files (id, tenant, filename, purpose, bytes, created_at, content) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (file_id, tenant, filename, purpose, len(content), now, content),
        )
        row = self.get_file(file_id)
        assert row is not None
        return row

    def get_file(self, file_id: str) -> dict[str, Any] | None:
        return self._one(
            "SELECT id, tenant, filename, purpose, bytes, created_at FROM files WHERE id = ?",
            (file_id,),
        )

    def file_content(self, file_id: str) -> bytes | None:
        row = self._db.execute("SELECT content FROM files WHERE id = ?", (file_id,)).fetchone()
        return bytes(row[0]) if row is not None else None

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
    ) -> dict[str, Any]:
        batch_id = "batch_" + uuid.uuid4().hex[:24]
        self._db.execute(
            "INSERT INTO batches (id, tenant, principal, endpoint, input_file_id, "
            "completion_window, window_s, status, metadata, created_at, expires_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, 'validating', ?, ?, ?)",
            (
                batch_id,
                principal["tenant"],
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

    def start_batch(self, batch_id: str, lines: Sequence[BatchLine], now: float) -> bool:
        """validating -> in_progress with one journal row per line, in one transaction."""
        with self._tx() as db:
            cur = db.execute(
                "UPDATE batches SET status = 'in_progress', in_progress_at = ? "
                "WHERE id = ? AND status = 'validating'",
                (now, batch_id),
            )
            if cur.rowcount != 1:
                return False
            db.executemany(
                "INSERT OR IGNORE INTO requests (batch_id, custom_id, line, url, body) "
                "VALUES (?, ?, ?, ?, ?)",
                [(batch_id, x.custom_id, x.line, x.url, json.dumps(x.body)) for x in lines],
            )
        return True

    def fail_validation(self, batch_id: str, errors: list[dict[str, Any]], now: float) -> None:
        self._db.execute(
            "UPDATE batches SET status = 'failed', failed_at = ?, errors = ? "
            "WHERE id = ? AND status IN ('validating', 'cancelling')",
            (now, json.dumps(errors), batch_id),
        )

    # the journal ---------------------------------------------------------------------------

    def resume(self, batch_id: str) -> int:
        """Put requests a dead runner left `started` back to pending; returns how many."""
        cur = self._db.execute(
            "UPDATE requests SET state = 'pending' WHERE batch_id = ? AND state = 'started'",
            (batch_id,),
        )
        return cur.rowcount

    def claim(self, batch_id: str, limit: int, now: float) -> list[dict[str, Any]]:
        """Mark up to `limit` due pending requests started (in line order) and return them."""
        if limit <= 0:
            return []
        with self._tx() as db:
            rows = db.execute(
                "SELECT custom_id, line, url, body, retries, attempts FROM requests "
                "WHERE batch_id = ? AND state = 'pending' AND not_before <= ? "
                "ORDER BY line LIMIT ?",
                (batch_id, now, limit),
            ).fetchall()
            db.executemany(
                "UPDATE requests SET state = 'started', attempts = attempts + 1, started_at = ? "
                "WHERE batch_id = ? AND custom_id = ?",
                [(now, batch_id, r["custom_id"]) for r in rows],
            )
        return [dict(r) | {"batch_id": batch_id} for r in rows]

    def retry_later(self, batch_id: str, custom_id: str, not_before: float) -> None:
        """A started request was not admitted (429/503): pending again, due at `not_before`."""
        self._db.execute(
            "UPDATE requests SET state = 'pending', retries = retries + 1, not_before = ? "
            "WHERE batch_id = ? AND custom_id = ? AND state = 'started'",
            (not_before, batch_id, custom_id),
        )

    def finish(
        self, batch_id: str, custom_id: str, outcome: str, result: dict[str, Any], now: float
    ) -> bool:
        """Record a started request's result line once; False if it was not started (a result
        already written, or the batch finalised meanwhile)."""
        cur = self._db.execute(
            "UPDATE requests SET state = 'done', outcome = ?, result = ?, finished_at = ? "
            "WHERE batch_id = ? AND custom_id = ? AND state = 'started'",
            (outcome, json.dumps(result), now, batch_id, custom_id),
        )
        return cur.rowcount == 1

    def counts(self, batch_id: str) -> dict[str, int]:
        row = self._db.execute(
            "SELECT COUNT(*), SUM(outcome = 'completed'), SUM(outcome = 'failed'), "
            "SUM(state = 'pending') FROM requests WHERE batch_id = ?",
            (batch_id,),
        ).fetchone()
        return {"total": row[0], "completed": row[1] or 0, "failed": row[2] or 0}

    def pending_count(self, batch_id: str) -> int:
        row = self._db.execute(
            "SELECT COUNT(*) FROM requests WHERE batch_id = ? AND state != 'done'", (batch_id,)
        ).fetchone()
        return int(row[0])

    def finalize(
        self,
        batch_id: str,
        status: str,
        now: float,
        unrun_error: dict[str, str] | None = None,
        errors: list[dict[str, Any]] | None = None,
    ) -> None:
        """Write the output and error files and move the batch to `status` (completed, failed,
        expired, cancelled), in one transaction. Requests not done get `unrun_error` as their
        error line. A no-op on a batch already final."""
        with self._tx() as db:
            row = db.execute("SELECT status FROM batches WHERE id = ?", (batch_id,)).fetchone()
            if row is None or row[0] in FINAL:
                return
            if unrun_error is not None:
                for r in db.execute(
                    "SELECT custom_id FROM requests WHERE batch_id = ? AND state != 'done'",
                    (batch_id,),
                ).fetchall():
                    line = {
                        "id": "batch_req_" + request_uid(batch_id, r[0]),
                        "custom_id": r[0],
                        "response": None,
                        "error": unrun_error,
                    }
                    db.execute(
                        "UPDATE requests SET state = 'done', outcome = 'failed', result = ?, "
                        "finished_at = ? WHERE batch_id = ? AND custom_id = ?",
                        (json.dumps(line), now, batch_id, r[0]),
                    )
            file_ids: dict[str, str | None] = {}
            for outcome, column in (("completed", "output_file_id"), ("failed", "error_file_id")):
                lines = [
                    r[0] + "\n"
                    for r in db.execute(
                        "SELECT result FROM requests WHERE batch_id = ? AND outcome = ? "
                        "ORDER BY line",
                        (batch_id, outcome),
                    ).fetchall()
                ]
                file_ids[column] = None
                if lines:
                    content = "".join(lines).encode()
                    file_id = "file-" + uuid.uuid4().hex[:24]
                    db.execute(
                        "INSERT INTO files (id, tenant, filename, purpose, bytes, created_at, "
                        "content) SELECT ?, tenant, ?, 'batch_output', ?, ?, ? FROM batches "
                        "WHERE id = ?",
                        (
                            file_id,
                            f"{batch_id}_{column[:-8]}.jsonl",
                            len(content),
                            now,
                            content,
                            batch_id,
                        ),
                    )
                    file_ids[column] = file_id
            stamp = {"completed": "completed_at", "failed": "failed_at"}.get(status, "")
            stamp = stamp or {"expired": "expired_at", "cancelled": "cancelled_at"}[status]
            db.execute(
                f"UPDATE batches SET status = ?, {stamp} = ?, output_file_id = ?, "
                "error_file_id = ?, errors = COALESCE(?, errors), "
                "finalizing_at = COALESCE(finalizing_at, ?) WHERE id = ?",
                (
                    status,
                    now,
                    file_ids["output_file_id"],
                    file_ids["error_file_id"],
                    json.dumps(errors) if errors else None,
                    now,
                    batch_id,
                ),
            )

    def set_finalizing(self, batch_id: str, now: float) -> None:
        self._db.execute(
            "UPDATE batches SET status = 'finalizing', finalizing_at = ? "
            "WHERE id = ? AND status = 'in_progress'",
            (now, batch_id),
        )

    # leases --------------------------------------------------------------------------------

    def acquire_lease(self, batch_id: str, owner: str, now: float, ttl_s: float) -> bool:
        """Take (or keep) the run lease of a batch: free, expired, or already ours."""
        with self._tx() as db:
            row = db.execute(
                "SELECT owner, expires_at FROM leases WHERE batch_id = ?", (batch_id,)
            ).fetchone()
            if row is not None and row[0] != owner and row[1] > now:
                return False
            db.execute(
                "INSERT INTO leases (batch_id, owner, expires_at) VALUES (?, ?, ?) "
                "ON CONFLICT(batch_id) DO UPDATE SET owner = excluded.owner, "
                "expires_at = excluded.expires_at",
                (batch_id, owner, now + ttl_s),
            )
        return True

    def renew_lease(self, batch_id: str, owner: str, now: float, ttl_s: float) -> bool:
        cur = self._db.execute(
            "UPDATE leases SET expires_at = ? WHERE batch_id = ? AND owner = ?",
            (now + ttl_s, batch_id, owner),
        )
        return cur.rowcount == 1

    def release_lease(self, batch_id: str, owner: str) -> None:
        self._db.execute("DELETE FROM leases WHERE batch_id = ? AND owner = ?", (batch_id, owner))
