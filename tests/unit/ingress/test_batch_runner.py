"""The Batch API's store and runner (pure: SQLite in a temp dir, a fake clock, a scripted
executor): lifecycle, retries of 429s, cancel, expiry, early failure, leases, and resuming
after a runner dies mid-batch without losing or re-running a request."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from batch_doubles import (
    PRINCIPAL,
    FakeClock,
    ScriptedExecutor,
    batch_jsonl,
    new_batch,
    open_store,
    output_lines,
    runner,
)

from services.ingress.core.batch_runner import ExecResult
from services.ingress.core.batch_store import BatchStore

TOO_MANY = ExecResult(429, {"error": {"message": "busy"}}, retry_after_s=5.0)
BAD = ExecResult(400, {"error": {"message": "max_tokens: too big", "param": "max_tokens"}})


@pytest.mark.parametrize(
    ("script", "status", "completed", "failed"),
    [
        (lambda _c, _n: None, "completed", 10, 0),
        # every request's first attempt is rejected 429: retried later, never failed
        (lambda _c, n: TOO_MANY if n == 1 else None, "completed", 10, 0),
        # r3 and r7 are bad requests: final, into the error file
        (lambda c, _n: BAD if c in ("r3", "r7") else None, "completed", 8, 2),
    ],
    ids=["all-ok", "429-then-ok", "two-bad"],
)
def test_batch_runs_to_completion(
    tmp_path: Path, script: object, status: str, completed: int, failed: int
) -> None:
    clock = FakeClock()
    store = open_store(tmp_path)
    executor = ScriptedExecutor(clock, script)  # type: ignore[arg-type]
    batch_id = new_batch(store, 10, clock)
    asyncio.run(runner(store, executor, clock).run_batch(batch_id))
    row = store.get_batch(batch_id)
    assert row is not None and row["status"] == status
    assert row["in_progress_at"] is not None and row["completed_at"] is not None
    assert store.counts(batch_id) == {"total": 10, "completed": completed, "failed": failed}
    out = output_lines(store, batch_id, "output_file_id")
    errors = output_lines(store, batch_id, "error_file_id")
    assert len(out) == completed and len(errors) == failed
    assert [x["custom_id"] for x in out] == sorted(
        (x["custom_id"] for x in out), key=lambda c: int(c[1:])
    )
    assert all(x["response"]["status_code"] == 200 and x["error"] is None for x in out)
    assert all(x["response"]["status_code"] == 400 for x in errors)
    assert all(n == 1 for n in executor.completed.values())
    # every request carries the batch's expiry as its deadline, and an idempotent id
    assert {r.deadline_abs_s for r in executor.seen} == {row["expires_at"]}
    ids = {(r.custom_id, r.request_id) for r in executor.seen}
    assert len(ids) == 10


def test_429_waits_for_retry_after_and_halves_the_window(tmp_path: Path) -> None:
    clock = FakeClock()
    store = open_store(tmp_path)
    times: dict[str, list[float]] = {}

    def script(custom_id: str, attempt: int) -> ExecResult | None:
        times.setdefault(custom_id, []).append(clock.now)
        return TOO_MANY if attempt <= 2 else None

    executor = ScriptedExecutor(clock, script)
    batch_id = new_batch(store, 3, clock)
    run = runner(store, executor, clock, max_concurrent_requests=8)
    asyncio.run(run.run_batch(batch_id))
    assert store.counts(batch_id)["completed"] == 3
    for attempts in times.values():
        assert len(attempts) == 3
        assert attempts[1] - attempts[0] >= 5.0  # Retry-After
        assert attempts[2] - attempts[1] >= 5.0
    assert run.window.size < 8


def test_validation_failure_names_the_lines(tmp_path: Path) -> None:
    clock = FakeClock()
    store = open_store(tmp_path)
    file = store.create_file(
        "anonymous",
        "in.jsonl",
        "batch",
        b'{"custom_id":"a","method":"POST","url":"/v1/completions",'
        b'"body":{"model":"m","prompt":"p"}}\n',
        clock(),
    )
    row = store.create_batch(PRINCIPAL, file["id"], "/v1/chat/completions", "1h", 3600, None, 0)
    executor = ScriptedExecutor(clock)
    asyncio.run(runner(store, executor, clock).run_batch(row["id"]))
    after = store.get_batch(row["id"])
    assert after is not None and after["status"] == "failed"
    errors = json.loads(after["errors"])
    assert errors[0]["code"] == "mismatched_endpoint" and errors[0]["line"] == 1
    assert not executor.calls


@pytest.mark.parametrize(
    ("step_s", "window_s", "status", "code"),
    [
        # the fake clock moves 10 s per request started, 40 requests, a 120 s window: hopeless,
        # and room for the 4 finished requests the estimate needs however the store's threads
        # interleave (with 60 s, six starts before four finishes expired the batch first)
        (10.0, 120.0, "failed", "batch_failed"),
        # every request is rejected for ever: nothing to estimate from, so it expires
        (None, 15.0, "expired", "batch_expired"),
    ],
    ids=["early-fail", "expire"],
)
def test_batch_that_cannot_finish(
    tmp_path: Path, step_s: float | None, window_s: float, status: str, code: str
) -> None:
    clock = FakeClock()
    store = open_store(tmp_path)
    script = (lambda _c, _n: TOO_MANY) if step_s is None else None
    executor = ScriptedExecutor(clock, script, step_s=step_s or 0.0)
    batch_id = new_batch(store, 40, clock, window_s=window_s)
    run = runner(store, executor, clock, early_fail_min_done=4, early_fail_slack=1.0)
    asyncio.run(run.run_batch(batch_id))
    row = store.get_batch(batch_id)
    assert row is not None and row["status"] == status
    errors = output_lines(store, batch_id, "error_file_id")
    unrun = [x for x in errors if x["response"] is None]
    assert unrun and all(x["error"]["code"] == code for x in unrun)
    counts = store.counts(batch_id)
    assert counts["completed"] + counts["failed"] == counts["total"] == 40
    if status == "failed":
        assert row["failed_at"] < row["expires_at"]  # failed early, not at the deadline
        reason = json.loads(row["errors"])[0]
        assert reason["code"] == "window_exceeded" and "requests/s" in reason["message"]
    else:
        assert row["expired_at"] >= row["expires_at"]


def test_cancel_mid_batch(tmp_path: Path) -> None:
    clock = FakeClock()
    store = open_store(tmp_path)
    batch_id = new_batch(store, 20, clock)

    def script(custom_id: str, _attempt: int) -> ExecResult | None:
        if custom_id == "r5":
            store.request_cancel(batch_id, clock())
        return None

    executor = ScriptedExecutor(clock, script)
    asyncio.run(runner(store, executor, clock).run_batch(batch_id))
    row = store.get_batch(batch_id)
    assert row is not None and row["status"] == "cancelled"
    assert row["cancelling_at"] is not None and row["cancelled_at"] is not None
    counts = store.counts(batch_id)
    assert 6 <= counts["completed"] < 20
    unrun = output_lines(store, batch_id, "error_file_id")
    assert {x["error"]["code"] for x in unrun} == {"batch_cancelled"}
    assert counts["completed"] + len(unrun) == 20


def test_only_the_lease_holder_runs_a_batch(tmp_path: Path) -> None:
    clock = FakeClock()
    store = open_store(tmp_path)
    other = BatchStore(tmp_path / "store")  # a second replica's connection to the same file
    batch_id = new_batch(store, 2, clock)
    assert store.acquire_lease(batch_id, "a", clock(), 30.0)
    assert not other.acquire_lease(batch_id, "b", clock() + 29.0, 30.0)
    assert store.acquire_lease(batch_id, "a", clock() + 29.0, 30.0)  # renewal by its owner
    assert other.acquire_lease(batch_id, "b", clock() + 60.0, 30.0)  # lapsed: taken over
    assert not store.renew_lease(batch_id, "a", clock() + 61.0, 30.0)


def test_resume_after_a_runner_dies_mid_batch(tmp_path: Path) -> None:
    """Runner A dies (its task cancelled, its store closed) with r2 and r3 in flight; runner B
    on a new connection to the same file takes over after A's lease lapses: every request
    completes exactly once and appears exactly once in the output."""
    clock = FakeClock()
    store_a = open_store(tmp_path)
    executor_a = ScriptedExecutor(clock)
    executor_a.block = {"r2", "r3"}
    batch_id = new_batch(store_a, 12, clock)

    async def crash() -> None:
        run = runner(store_a, executor_a, clock, owner="a", max_concurrent_requests=2)
        assert store_a.acquire_lease(batch_id, "a", clock(), 30.0)
        task = asyncio.get_running_loop().create_task(run._run(batch_id))
        for _ in range(100_000):  # until r2 and r3 are both stuck in flight
            if executor_a.calls["r2"] and executor_a.calls["r3"]:
                break
            await asyncio.sleep(0.001)
        task.cancel()  # the process dies: no lease release, no cleanup of started rows
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(crash())
    store_a.close()
    assert set(executor_a.completed) == {"r0", "r1"}
    store_b = open_store(tmp_path)
    executor_b = ScriptedExecutor(clock)
    run_b = runner(store_b, executor_b, clock, owner="b")
    assert not store_b.acquire_lease(batch_id, "b", clock(), 30.0)  # A's lease still holds
    clock.now += 31.0

    async def take_over() -> None:
        await run_b.poll_once()
        await asyncio.gather(*run_b._running.values())

    asyncio.run(take_over())
    row = store_b.get_batch(batch_id)
    assert row is not None and row["status"] == "completed"
    out = output_lines(store_b, batch_id, "output_file_id")
    assert sorted(x["custom_id"] for x in out) == sorted(f"r{i}" for i in range(12))
    done = executor_a.completed + executor_b.completed
    assert all(done[f"r{i}"] == 1 for i in range(12)), done
    assert {"r2", "r3"} <= set(executor_b.completed)


@pytest.mark.parametrize(
    ("content", "delete_input", "code", "text"),
    [
        (batch_jsonl(3) + b"not json\n" + batch_jsonl(1), False, "invalid_request", "line 4"),
        (batch_jsonl(4), True, "invalid_request", "was deleted"),
        (
            batch_jsonl(2, url="/v1/chat/completions"),
            False,
            "mismatched_endpoint",
            "does not match",
        ),
    ],
    ids=["bad-line-mid-file", "input-deleted", "other-endpoint"],
)
def test_validation_streams_the_file_and_rolls_back(
    tmp_path: Path, content: bytes, delete_input: bool, code: str, text: str
) -> None:
    """The input is validated and journaled in pieces in one transaction: a failure anywhere
    fails the batch with its reason and leaves no journal row behind."""
    clock = FakeClock()
    store = open_store(tmp_path)
    file = store.create_file("anonymous", "in.jsonl", "batch", content, clock())
    row = store.create_batch(PRINCIPAL, file["id"], "/v1/completions", "1h", 3600, None, 0)
    if delete_input:
        store.file_path(file["id"]).unlink()
    executor = ScriptedExecutor(clock)
    asyncio.run(runner(store, executor, clock).run_batch(row["id"]))
    after = store.get_batch(row["id"])
    assert after is not None and after["status"] == "failed"
    error = json.loads(after["errors"])[0]
    assert error["code"] == code and text in error["message"]
    journal = store._db.execute("SELECT COUNT(*) FROM requests WHERE batch_id = ?", (row["id"],))
    assert journal.fetchone()[0] == 0 and not executor.calls
