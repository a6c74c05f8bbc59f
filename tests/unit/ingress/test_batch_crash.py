"""Crash and restart: a runner process is killed (SIGKILL) mid-batch with requests in flight;
a new runner on the same SQLite file takes the batch over once the dead one's lease lapses.
No request is lost, none completes twice, each is in the output file exactly once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from batch_crash_child import LoggingExecutor
from batch_doubles import new_batch, output_lines

from services.ingress.core.batch_files import BatchConfig
from services.ingress.core.batch_runner import BatchRunner
from services.ingress.core.batch_store import BatchStore

ROOT = Path(__file__).resolve().parents[3]
N = 60
HANG = {"r30", "r31", "r32"}


class _Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def test_killed_runner_loses_nothing_and_runs_nothing_twice(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    log = tmp_path / "completions.log"
    store = BatchStore(store_dir)
    batch_id = new_batch(store, N, _Clock(), window_s=3600.0)
    child = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).with_name("batch_crash_child.py")),
            str(store_dir),
            str(log),
            ",".join(sorted(HANG)),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline:  # until the child is stuck on the hanging requests
            counts = store.counts(batch_id)
            if counts["completed"] >= N - len(HANG) - 4:
                break
            time.sleep(0.05)
        time.sleep(0.2)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    before = Counter(log.read_text().split())
    assert before and not set(before) & HANG
    assert store.get_batch(batch_id)["status"] == "in_progress"  # type: ignore[index]

    config = BatchConfig(lease_ttl_s=1.0, poll_interval_s=0.05, max_concurrent_requests=4)
    runner = BatchRunner(
        BatchStore(store_dir),
        LoggingExecutor(str(log), set()),
        config,
        owner="restarted",
        clock=time.time,
    )

    async def resume() -> None:
        for _ in range(400):  # the dead child's lease lapses after lease_ttl_s
            await runner.poll_once()
            if runner._running:
                await asyncio.gather(*runner._running.values())
                return
            await asyncio.sleep(0.05)

    asyncio.run(resume())
    row = store.get_batch(batch_id)
    assert row is not None and row["status"] == "completed"
    completions = Counter(log.read_text().split())
    assert completions == Counter({f"r{i}": 1 for i in range(N)})  # none lost, none twice
    out = output_lines(store, batch_id, "output_file_id")
    assert sorted(x["custom_id"] for x in out) == sorted(f"r{i}" for i in range(N))
    assert store.counts(batch_id) == {"total": N, "completed": N, "failed": 0}
