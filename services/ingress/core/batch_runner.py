"""Runs batches from the store through an injected executor (pure: injected clock and sleep).

One `BatchRunner` per ingress replica. `run_forever` looks for active batches every
`poll_interval_s` and runs each one whose lease it gets (`BatchStore.acquire_lease`) as its own
task, renewing the lease while it runs. A batch's life:

1. **validating**: the input file is parsed (`parse_batch_file`) and every line must target the
   batch's endpoint; a failure moves it to `failed` with the errors (line numbers). Otherwise the
   journal gets one row per line and the batch goes `in_progress`.
2. **in_progress**: on taking the lease, rows a dead runner left `started` go back to pending
   (`resume`). Pending rows are claimed in line order and sent through the executor, at most
   `window` at once across all batches of this runner: additive increase, multiplicative
   decrease (each 429/503 halves the window, each success grows it by 1/window, capped by
   `max_concurrent_requests`), so batch work backs off as soon as admission pushes back. A 429
   or 503 puts the row back, due after max(Retry-After, retry_min_s * 2^retries) capped by
   retry_max_s: retried later, never failed. A server fault (another 5xx, such as a replica
   lost mid-request, or an exception from the executor) is retried the same way until
   `max_fault_attempts` attempts of that request faulted; then its last answer is final. Other
   answers are final: 2xx to the output file, anything else to the error file. The executor
   gets the batch's `expires_at` as the request's end-to-end deadline.
3. **Early failure**: once `early_fail_min_done` requests finished in this run and
   `early_fail_min_elapsed_fraction` of the window elapsed, the remaining requests at the
   measured rate (done in this run / time since this run started) must fit in the time left
   times `early_fail_slack`; if not, the batch fails now, with the estimate as its reason,
   instead of expiring at the end of its window. In-flight requests are cancelled; finished
   results are kept in the output file.
4. **finalizing** -> `completed` when every row is done; `expired` at `expires_at`; `cancelled`
   after a cancel, once in-flight requests returned. Output and error files are written in the
   same transaction as the final status (`BatchStore.finalize`).

Every store call runs on the runner's own thread (`StoreThread`, its own SQLite connection),
never on the event loop; the input file is validated and journaled there in pieces. Every
`sweep_interval_s` the runner also deletes expired files and batches (`BatchStore.sweep`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from services.ingress.core.batch_files import BatchConfig, EndpointMismatch, read_input_file
from services.ingress.core.batch_store import FINAL, BatchStore, request_uid
from services.ingress.core.batch_thread import StoreThread
from services.ingress.core.errors import APIError

log = logging.getLogger("slomesh.ingress.batch")

RETRY_STATUSES = (429, 503)


@dataclass(frozen=True, slots=True)
class BatchRequest:
    """One request of a batch, as the executor sees it."""

    batch_id: str
    custom_id: str
    request_id: str
    """Idempotent id (`request_uid`): the same on every attempt."""
    url: str
    body: dict[str, Any]
    deadline_abs_s: float
    """The batch's expires_at: the request's end-to-end deadline (seconds since the epoch)."""
    principal: dict[str, Any]
    """Who created the batch (tenant, key's default class, token limit)."""
    attempt: int = 1
    """Which attempt this is (1 first; retries after 429/503 and resumes after a crash count)."""


@dataclass(frozen=True, slots=True)
class ExecResult:
    """An executed request: its HTTP status, JSON body and Retry-After (429/503)."""

    status_code: int
    body: dict[str, Any]
    retry_after_s: float | None = None


class BatchExecutor(Protocol):
    async def execute(self, request: BatchRequest) -> ExecResult: ...


class _Window:
    """Additive-increase / multiplicative-decrease bound on requests in flight."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.size = float(cap)
        self.in_flight = 0

    def free(self) -> int:
        return max(0, int(self.size) - self.in_flight)

    def success(self) -> None:
        self.size = min(float(self.cap), self.size + 1.0 / max(self.size, 1.0))

    def pushback(self) -> None:
        self.size = max(1.0, self.size / 2.0)


class BatchRunner:
    def __init__(
        self,
        store: BatchStore,
        executor: BatchExecutor,
        config: BatchConfig,
        *,
        owner: str,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.store = store
        self.executor = executor
        self.config = config
        self.owner = owner
        self.clock = clock
        self.sleep = sleep
        self.window = _Window(config.max_concurrent_requests)
        self.db = StoreThread("batch-runner")
        self._running: dict[str, asyncio.Task[None]] = {}
        self._swept_s = float("-inf")

    async def run_forever(self) -> None:
        while True:
            try:
                await self.poll_once()
                await self.sweep_if_due()
            except Exception:
                log.exception("batch runner poll failed")
            await self.sleep(self.config.poll_interval_s)

    async def sweep_if_due(self) -> dict[str, int] | None:
        """Delete expired files and batches and upload leftovers, once per sweep_interval_s."""
        now = self.clock()
        if now - self._swept_s < self.config.sweep_interval_s:
            return None
        self._swept_s = now
        cfg = self.config
        # an upload's part file is written at least every upload_idle_timeout_s until it is
        # moved in or cut off; an hour more is far past any upload or finalize still going on
        orphan_age_s = max(cfg.upload_deadline_s, cfg.upload_idle_timeout_s) + 3600.0
        gone = await self.db(self.store.sweep, now, cfg.batch_retention_s, orphan_age_s)
        if any(gone.values()):
            log.info("batch sweep deleted %s", gone)
        return gone

    async def poll_once(self) -> None:
        """Start a task for each active batch whose lease this runner gets."""
        for batch_id in await self.db(self.store.active_batch_ids):
            if batch_id in self._running:
                continue
            if await self.db(
                self.store.acquire_lease,
                batch_id,
                self.owner,
                self.clock(),
                self.config.lease_ttl_s,
            ):
                task = asyncio.get_running_loop().create_task(self.run_batch(batch_id))
                self._running[batch_id] = task
                task.add_done_callback(functools.partial(self._forget, batch_id))

    def _forget(self, batch_id: str, _task: asyncio.Task[None]) -> None:
        self._running.pop(batch_id, None)

    async def stop(self) -> None:
        """Cancel every batch task (their in-flight requests are cancelled with them)."""
        tasks = list(self._running.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def run_batch(self, batch_id: str) -> None:
        """Run one batch (taking its lease, or keeping it) until it is final or the lease is
        lost."""
        if not await self.db(
            self.store.acquire_lease, batch_id, self.owner, self.clock(), self.config.lease_ttl_s
        ):
            return
        try:
            await self._run(batch_id)
        finally:
            await self.db(self.store.release_lease, batch_id, self.owner)

    def _validate(self, batch: dict[str, Any]) -> bool:
        """(On the store's thread.) Journal the input file's lines and start the batch, or fail
        it with the errors (the file gone, a bad line, lines for another endpoint)."""
        batch_id = batch["id"]
        path = self.store.file_path(batch["input_file_id"])
        error: dict[str, Any]
        try:
            lines = read_input_file(str(path), self.config, batch["endpoint"])
            return self.store.start_batch(batch_id, lines, self.clock())
        except APIError as err:
            error = {"code": "invalid_request", "message": err.message, "param": err.param}
            errors = [error | {"line": None}]
        except FileNotFoundError:
            message = f"input file {batch['input_file_id']} was deleted"
            errors = [{"code": "invalid_request", "message": message, "line": None}]
        except EndpointMismatch as err:
            errors = err.errors
        self.store.fail_validation(batch_id, errors, self.clock())
        return False

    async def _run(self, batch_id: str) -> None:
        batch = await self.db(self.store.get_batch, batch_id)
        if batch is None or batch["status"] in FINAL:
            return
        if batch["status"] == "validating" and not await self.db(self._validate, batch):
            return
        resumed = await self.db(self.store.resume, batch_id)
        if resumed:
            log.info("batch %s: %d requests a dead runner left started resumed", batch_id, resumed)
        started_s = self.clock()
        done_in_run = 0
        in_flight: dict[asyncio.Task[bool], str] = {}
        renewed_s = started_s
        try:
            while True:
                batch = await self.db(self.store.get_batch, batch_id)
                now = self.clock()
                if batch is None or batch["status"] in FINAL:
                    return
                if now - renewed_s >= self.config.lease_ttl_s / 3:
                    if not await self.db(
                        self.store.renew_lease, batch_id, self.owner, now, self.config.lease_ttl_s
                    ):
                        log.warning("batch %s: lease lost; another replica runs it", batch_id)
                        return
                    renewed_s = now
                if now >= batch["expires_at"]:
                    await self.db(
                        self.store.finalize, batch_id, "expired", now, _unrun("batch_expired")
                    )
                    return
                if batch["status"] == "cancelling":
                    if not in_flight:
                        await self.db(
                            self.store.finalize,
                            batch_id,
                            "cancelled",
                            now,
                            _unrun("batch_cancelled"),
                        )
                        return
                else:
                    reason = await self._too_slow(batch, started_s, done_in_run, now)
                    if reason is not None:
                        await self.db(
                            self.store.finalize,
                            batch_id,
                            "failed",
                            now,
                            _unrun("batch_failed", reason),
                            [{"code": "window_exceeded", "message": reason, "line": None}],
                        )
                        return
                    claimed = await self.db(self.store.claim, batch_id, self.window.free(), now)
                    for row in claimed:
                        request = BatchRequest(
                            batch_id,
                            row["custom_id"],
                            request_uid(batch_id, row["custom_id"]),
                            row["url"],
                            json.loads(row["body"]),
                            float(batch["expires_at"]),
                            json.loads(batch["principal"]),
                            int(row["attempts"]) + 1,
                        )
                        self.window.in_flight += 1
                        task = asyncio.get_running_loop().create_task(
                            self._one(request, row["retries"], row["faults"])
                        )
                        in_flight[task] = row["custom_id"]
                    if not in_flight and await self.db(self.store.pending_count, batch_id) == 0:
                        await self.db(self.store.set_finalizing, batch_id, now)
                        await self.db(self.store.finalize, batch_id, "completed", self.clock())
                        return
                if in_flight:
                    done, _ = await asyncio.wait(
                        in_flight,
                        timeout=self.config.poll_interval_s,
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                    for task in done:
                        in_flight.pop(task)
                        self.window.in_flight -= 1
                        done_in_run += int(task.result())
                else:
                    await self.sleep(self.config.poll_interval_s)
        finally:
            for task in in_flight:
                task.cancel()
            for task in in_flight:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                self.window.in_flight -= 1

    async def _one(self, request: BatchRequest, retries: int, faults: int) -> bool:
        """Execute one claimed request; True when its result was recorded (a finished
        request), False when it goes back to pending for a retry."""
        try:
            result = await self.executor.execute(request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("batch request %s/%s failed", request.batch_id, request.custom_id)
            result = ExecResult(
                500,
                {
                    "error": {
                        "message": f"internal error: {type(exc).__name__}",
                        "type": "server_error",
                        "param": None,
                        "code": "internal_error",
                    }
                },
            )
        now = self.clock()
        fault = result.status_code >= 500 and result.status_code not in RETRY_STATUSES
        if result.status_code in RETRY_STATUSES or (
            fault and faults + 1 < self.config.max_fault_attempts
        ):
            self.window.pushback()
            backoff = min(self.config.retry_max_s, self.config.retry_min_s * 2.0**retries)
            wait = max(backoff, result.retry_after_s or 0.0)
            if fault:
                log.warning(
                    "batch request %s/%s: server fault %d (attempt %d faulted), retried",
                    request.batch_id,
                    request.custom_id,
                    result.status_code,
                    faults + 1,
                )
            await self.db(
                self.store.retry_later, request.batch_id, request.custom_id, now + wait, fault
            )
            return False
        ok = 200 <= result.status_code < 300
        if ok:
            self.window.success()
        line = {
            "id": "batch_req_" + request.request_id,
            "custom_id": request.custom_id,
            "response": {
                "status_code": result.status_code,
                "request_id": request.request_id,
                "body": result.body,
            },
            "error": None,
        }
        outcome = "completed" if ok else "failed"
        return await self.db(
            self.store.finish, request.batch_id, request.custom_id, outcome, line, now
        )

    async def _too_slow(
        self, batch: dict[str, Any], started_s: float, done_in_run: int, now: float
    ) -> str | None:
        """The reason a batch cannot finish in its window, judged from its progress rate in
        this run (None: it can, or it is too early to tell)."""
        cfg = self.config
        elapsed = now - started_s
        window_s = float(batch["window_s"])
        if done_in_run < cfg.early_fail_min_done or elapsed <= 0:
            return None
        if now - float(batch["created_at"]) < cfg.early_fail_min_elapsed_fraction * window_s:
            return None
        rate = done_in_run / elapsed
        remaining = await self.db(self.store.pending_count, batch["id"])
        need_s = remaining / rate
        left_s = float(batch["expires_at"]) - now
        if need_s <= cfg.early_fail_slack * left_s:
            return None
        return (
            f"cannot finish within its completion window: {remaining} requests left at "
            f"{rate:.2f} requests/s need ~{need_s:.0f} s, but the window ends in {left_s:.0f} s "
            f"(rate measured over {done_in_run} requests in {elapsed:.0f} s)"
        )


def _unrun(code: str, reason: str | None = None) -> dict[str, str]:
    messages = {
        "batch_expired": "This request could not be executed before the completion window expired.",
        "batch_cancelled": "This request was not executed: the batch was cancelled.",
        "batch_failed": f"This request was not executed: the batch failed ({reason}).",
    }
    return {"code": code, "message": messages[code]}
