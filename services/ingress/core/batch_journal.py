"""The request journal and run leases of the Batch API's store (a mixin of `BatchStore`).

- `requests`: one row per request line, keyed by (batch_id, custom_id), the request's
  idempotent id. `state` goes pending -> started (claimed by the lease holder) -> done;
  `finish` writes the result line only while the row is `started` (UPDATE ... WHERE state =
  'started'), so a result is written exactly once. A row left `started` by a crash is put back
  to pending by the next lease holder (`resume`) and runs again: its first attempt never
  finished (the engine aborted it when the ingress's stream was cut). `faults` counts the
  attempts that ended in a server fault (bounded by the runner).
- `finalize` streams the result lines, in line order, into the output and error files (one
  line in memory at a time), records the counts in the batch row and deletes the batch's
  journal rows, all in one transaction: the journal holds only open batches.
- `leases`: (batch_id, owner, expires_at): only the owner of an unexpired lease runs a batch,
  so with several ingress replicas exactly one runs each batch; a dead owner's lease lapses
  after `lease_ttl_s` and another replica takes the batch over.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import uuid
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from itertools import islice
from pathlib import Path
from typing import Any

from services.ingress.core.batch_files import BatchLine

ACTIVE = ("validating", "in_progress", "finalizing", "cancelling")
FINAL = ("completed", "failed", "expired", "cancelled")
_INSERT_ROWS = 1000


def request_uid(batch_id: str, custom_id: str) -> str:
    """The idempotent id of a batch request (the same on every attempt and after a restart)."""
    return hashlib.sha256(f"{batch_id}\0{custom_id}".encode()).hexdigest()[:24]


class Journal:
    """The journal and lease methods of `BatchStore`, over its connection."""

    JOURNAL_SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    batch_id TEXT NOT NULL, custom_id TEXT NOT NULL, line INTEGER NOT NULL, url TEXT NOT NULL,
    body TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'pending', outcome TEXT, result TEXT,
    attempts INTEGER NOT NULL DEFAULT 0, retries INTEGER NOT NULL DEFAULT 0,
    faults INTEGER NOT NULL DEFAULT 0,
    not_before REAL NOT NULL DEFAULT 0, started_at REAL, finished_at REAL,
    PRIMARY KEY (batch_id, custom_id)
);
CREATE INDEX IF NOT EXISTS requests_state ON requests (batch_id, state, line);
CREATE TABLE IF NOT EXISTS leases (
    batch_id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at REAL NOT NULL
);
"""
    _db: sqlite3.Connection
    files_dir: Path
    uploads_dir: Path
    output_retention_s: float

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError  # BatchStore._tx

    def upload_path(self) -> Path:
        raise NotImplementedError  # BatchStore.upload_path

    def start_batch(self, batch_id: str, lines: Iterable[BatchLine], now: float) -> bool:
        """validating -> in_progress with one journal row per line, in one transaction; the
        lines are consumed in pieces (an exception from them rolls everything back)."""
        with self._tx() as db:
            cur = db.execute(
                "UPDATE batches SET status = 'in_progress', in_progress_at = ? "
                "WHERE id = ? AND status = 'validating'",
                (now, batch_id),
            )
            if cur.rowcount != 1:
                return False
            rows = ((batch_id, x.custom_id, x.line, x.url, json.dumps(x.body)) for x in lines)
            while chunk := list(islice(rows, _INSERT_ROWS)):
                db.executemany(
                    "INSERT OR IGNORE INTO requests (batch_id, custom_id, line, url, body) "
                    "VALUES (?, ?, ?, ?, ?)",
                    chunk,
                )
        return True

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
                "SELECT custom_id, line, url, body, retries, attempts, faults FROM requests "
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

    def retry_later(
        self, batch_id: str, custom_id: str, not_before: float, fault: bool = False
    ) -> None:
        """A started request was not admitted (429/503), or ended in a server fault
        (`fault`, counted): pending again, due at `not_before`."""
        self._db.execute(
            "UPDATE requests SET state = 'pending', retries = retries + 1, faults = faults + ?, "
            "not_before = ? WHERE batch_id = ? AND custom_id = ? AND state = 'started'",
            (int(fault), not_before, batch_id, custom_id),
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
        """{total, completed, failed}: from the batch row once final, else the journal."""
        row = self._db.execute(
            "SELECT count_total, count_completed, count_failed FROM batches WHERE id = ?",
            (batch_id,),
        ).fetchone()
        if row is not None and row[0] is not None:
            return {"total": row[0], "completed": row[1], "failed": row[2]}
        row = self._db.execute(
            "SELECT COUNT(*), SUM(outcome = 'completed'), SUM(outcome = 'failed') "
            "FROM requests WHERE batch_id = ?",
            (batch_id,),
        ).fetchone()
        return {"total": row[0], "completed": row[1] or 0, "failed": row[2] or 0}

    def pending_count(self, batch_id: str) -> int:
        row = self._db.execute(
            "SELECT COUNT(*) FROM requests WHERE batch_id = ? AND state != 'done'", (batch_id,)
        ).fetchone()
        return int(row[0])

    def _write_results(self, db: sqlite3.Connection, batch_id: str, outcome: str) -> Path | None:
        """The batch's result lines of `outcome`, in line order, streamed into a new file under
        uploads/ (fsynced); None when there are none."""
        rows: Iterator[Any] = db.execute(
            "SELECT result FROM requests WHERE batch_id = ? AND outcome = ? ORDER BY line",
            (batch_id, outcome),
        )
        path: Path | None = None
        out = None
        try:
            for (result,) in rows:
                if out is None:
                    path = self.upload_path()
                    out = open(path, "wb")  # noqa: SIM115  # closed below
                out.write(result.encode() + b"\n")
            if out is not None:
                out.flush()
                os.fsync(out.fileno())
        except BaseException:
            if path is not None:
                path.unlink(missing_ok=True)
            raise
        finally:
            if out is not None:
                out.close()
        return path

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
        moved: list[Path] = []
        try:
            with self._tx() as db:
                row = db.execute(
                    "SELECT status, tenant FROM batches WHERE id = ?", (batch_id,)
                ).fetchone()
                if row is None or row[0] in FINAL:
                    return
                tenant = row[1]
                if unrun_error is not None:
                    self._fail_unrun(db, batch_id, unrun_error, now)
                counts = self.counts(batch_id)
                file_ids: dict[str, str | None] = {}
                for outcome, column in (
                    ("completed", "output_file_id"),
                    ("failed", "error_file_id"),
                ):
                    file_ids[column] = None
                    written = self._write_results(db, batch_id, outcome)
                    if written is None:
                        continue
                    file_id = "file-" + uuid.uuid4().hex[:24]
                    target = self.files_dir / file_id
                    size = written.stat().st_size
                    os.replace(written, target)
                    moved.append(target)
                    db.execute(
                        "INSERT INTO files (id, tenant, filename, purpose, bytes, created_at, "
                        "expires_at) VALUES (?, ?, ?, 'batch_output', ?, ?, ?)",
                        (
                            file_id,
                            tenant,
                            f"{batch_id}_{column[:-8]}.jsonl",
                            size,
                            now,
                            now + self.output_retention_s,
                        ),
                    )
                    file_ids[column] = file_id
                stamp = {
                    "completed": "completed_at",
                    "failed": "failed_at",
                    "expired": "expired_at",
                    "cancelled": "cancelled_at",
                }[status]
                db.execute(
                    f"UPDATE batches SET status = ?, {stamp} = ?, output_file_id = ?, "
                    "error_file_id = ?, errors = COALESCE(?, errors), "
                    "finalizing_at = COALESCE(finalizing_at, ?), count_total = ?, "
                    "count_completed = ?, count_failed = ? WHERE id = ?",
                    (
                        status,
                        now,
                        file_ids["output_file_id"],
                        file_ids["error_file_id"],
                        json.dumps(errors) if errors else None,
                        now,
                        counts["total"],
                        counts["completed"],
                        counts["failed"],
                        batch_id,
                    ),
                )
                db.execute("DELETE FROM requests WHERE batch_id = ?", (batch_id,))
        except BaseException:
            for path in moved:
                path.unlink(missing_ok=True)
            raise

    def _fail_unrun(
        self, db: sqlite3.Connection, batch_id: str, error: dict[str, str], now: float
    ) -> None:
        unrun = [
            r[0]
            for r in db.execute(
                "SELECT custom_id FROM requests WHERE batch_id = ? AND state != 'done'",
                (batch_id,),
            ).fetchall()
        ]
        db.executemany(
            "UPDATE requests SET state = 'done', outcome = 'failed', result = ?, "
            "finished_at = ? WHERE batch_id = ? AND custom_id = ?",
            [
                (
                    json.dumps(
                        {
                            "id": "batch_req_" + request_uid(batch_id, cid),
                            "custom_id": cid,
                            "response": None,
                            "error": error,
                        }
                    ),
                    now,
                    batch_id,
                    cid,
                )
                for cid in unrun
            ],
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
