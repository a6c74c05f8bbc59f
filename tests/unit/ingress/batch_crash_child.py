"""A batch runner in its own process, for test_batch_crash.py to kill with SIGKILL: it runs
the batch with a test-double executor that logs each completion to a file (one line per
custom_id, flushed and fsynced before the result is returned) and never answers the ids
named in argv[3] (requests in flight when the process dies)."""

from __future__ import annotations

import asyncio
import os
import sys
import time

from services.ingress.core.batch_files import BatchConfig
from services.ingress.core.batch_runner import BatchRequest, BatchRunner, ExecResult
from services.ingress.core.batch_store import BatchStore


class LoggingExecutor:
    def __init__(self, log_path: str, hang: set[str]) -> None:
        self.log_path = log_path
        self.hang = hang

    async def execute(self, request: BatchRequest) -> ExecResult:
        if request.custom_id in self.hang:
            await asyncio.Event().wait()
        await asyncio.sleep(0.005)
        with open(self.log_path, "a") as f:
            f.write(request.custom_id + "\n")
            f.flush()
            os.fsync(f.fileno())
        return ExecResult(200, {"id": request.request_id, "choices": []})


def main() -> None:
    store_dir, log_path, hang = sys.argv[1], sys.argv[2], sys.argv[3]
    config = BatchConfig(max_concurrent_requests=4, lease_ttl_s=1.0, poll_interval_s=0.05)
    runner = BatchRunner(
        BatchStore(store_dir),
        LoggingExecutor(log_path, set(hang.split(",")) if hang else set()),
        config,
        owner=f"child-{os.getpid()}",
        clock=time.time,
    )
    asyncio.run(runner.run_forever())


if __name__ == "__main__":
    main()
