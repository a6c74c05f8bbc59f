"""Test doubles for the Batch API's runner: a fake clock and a scripted executor."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from services.ingress.core.batch_files import BatchConfig
from services.ingress.core.batch_runner import BatchRequest, BatchRunner, ExecResult
from services.ingress.core.batch_store import BatchStore

T0 = 1_700_000_000.0
PRINCIPAL = {"tenant": "anonymous", "default_class": None, "tokens_per_minute": None}


class FakeClock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)


def ok_body(request: BatchRequest) -> dict[str, Any]:
    return {"id": "cmpl-" + request.request_id, "object": "text_completion", "choices": []}


class ScriptedExecutor:
    """Answers each request by `script(custom_id, attempt) -> ExecResult | None` (None: 200);
    `step_s` advances the fake clock per request; `block` holds every request whose custom_id
    it names until released (a runner that dies mid-request). Counts completions per id."""

    def __init__(
        self,
        clock: FakeClock,
        script: Callable[[str, int], ExecResult | None] | None = None,
        step_s: float = 0.0,
    ) -> None:
        self.clock = clock
        self.script = script or (lambda _cid, _n: None)
        self.step_s = step_s
        self.block: set[str] = set()
        self.release = asyncio.Event()
        self.calls: Counter[str] = Counter()
        self.completed: Counter[str] = Counter()
        self.seen: list[BatchRequest] = []

    async def execute(self, request: BatchRequest) -> ExecResult:
        self.calls[request.custom_id] += 1
        self.seen.append(request)
        if request.custom_id in self.block:
            await self.release.wait()
        self.clock.now += self.step_s
        await asyncio.sleep(0)
        result = self.script(request.custom_id, self.calls[request.custom_id])
        if result is None:
            result = ExecResult(200, ok_body(request))
        if result.status_code == 200:
            self.completed[request.custom_id] += 1
        return result


def batch_jsonl(n: int, url: str = "/v1/completions", model: str = "llama") -> bytes:
    lines = []
    for i in range(n):
        body: dict[str, Any] = {"model": model, "max_tokens": 8}
        if url == "/v1/completions":
            body["prompt"] = f"prompt {i}"
        else:
            body["messages"] = [{"role": "user", "content": f"question {i}"}]
        lines.append(json.dumps({"custom_id": f"r{i}", "method": "POST", "url": url, "body": body}))
    return ("\n".join(lines) + "\n").encode()


def config(**overrides: Any) -> BatchConfig:
    base: dict[str, Any] = {"max_concurrent_requests": 4, "min_window_s": 1.0}
    return BatchConfig(**(base | overrides))


def new_batch(store: BatchStore, n: int, clock: FakeClock, window_s: float = 3600.0) -> str:
    file = store.create_file("anonymous", "in.jsonl", "batch", batch_jsonl(n), clock())
    row = store.create_batch(
        PRINCIPAL, file["id"], "/v1/completions", f"{int(window_s)}s", window_s, None, clock()
    )
    return str(row["id"])


def runner(
    store: BatchStore, executor: Any, clock: FakeClock, owner: str = "a", **overrides: Any
) -> BatchRunner:
    return BatchRunner(
        store, executor, config(**overrides), owner=owner, clock=clock, sleep=clock.sleep
    )


def output_lines(store: BatchStore, batch_id: str, column: str) -> list[dict[str, Any]]:
    row = store.get_batch(batch_id)
    assert row is not None
    if row[column] is None:
        return []
    content = store.file_path(row[column]).read_bytes()
    return [json.loads(x) for x in content.decode().splitlines()]


def open_store(tmp_path: Path) -> BatchStore:
    return BatchStore(tmp_path / "store")
