"""The OpenAI Batch API on the live mesh (simulated replicas), through the official `openai`
client unmodified: files.create, batches.create, retrieve polled to completed, the output file
downloaded, batches.list, and another batch cancelled."""

from __future__ import annotations

import json
import time
from typing import Any

import openai

from tests.integration.conftest import GOLD_KEY

MODEL = "llama-3.1-8b"


def _jsonl(n: int, prefix: str) -> bytes:
    lines = [
        json.dumps(
            {
                "custom_id": f"{prefix}-{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {
                    "model": MODEL,
                    "messages": [{"role": "user", "content": f"question number {i}"}],
                    "max_tokens": 8,
                },
            }
        )
        for i in range(n)
    ]
    return ("\n".join(lines) + "\n").encode()


def _wait(client: openai.OpenAI, batch_id: str, statuses: set[str], timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        batch = client.batches.retrieve(batch_id)
        if batch.status in statuses or time.monotonic() > deadline:
            return batch
        time.sleep(0.5)


def test_mesh_batch_api_with_openai_client(live_mesh: dict[str, Any]) -> None:
    client = openai.OpenAI(base_url=live_mesh["http"], api_key=GOLD_KEY)
    file = client.files.create(file=("questions.jsonl", _jsonl(24, "q")), purpose="batch")
    assert file.purpose == "batch" and client.files.retrieve(file.id).bytes == file.bytes
    batch = client.batches.create(
        input_file_id=file.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"test": "mesh"},
    )
    assert batch.status == "validating" and batch.metadata == {"test": "mesh"}

    big = client.files.create(file=("big.jsonl", _jsonl(400, "b")), purpose="batch")
    other = client.batches.create(
        input_file_id=big.id, endpoint="/v1/chat/completions", completion_window="1h"
    )
    cancelling = client.batches.cancel(other.id)
    assert cancelling.status in ("cancelling", "cancelled")

    done = _wait(client, batch.id, {"completed", "failed", "expired", "cancelled"}, 120.0)
    assert done.status == "completed", done
    assert done.request_counts is not None
    assert (done.request_counts.total, done.request_counts.completed) == (24, 24)
    assert done.in_progress_at and done.finalizing_at and done.completed_at
    assert done.output_file_id and done.error_file_id is None
    lines = [json.loads(x) for x in client.files.content(done.output_file_id).text.splitlines()]
    assert sorted(x["custom_id"] for x in lines) == sorted(f"q-{i}" for i in range(24))
    for line in lines:
        assert line["response"]["status_code"] == 200 and line["error"] is None
        body = line["response"]["body"]
        assert body["object"] == "chat.completion"
        assert body["usage"]["completion_tokens"] == 8
        assert body["choices"][0]["message"]["content"]

    cancelled = _wait(client, other.id, {"cancelled"}, 60.0)
    assert cancelled.status == "cancelled" and cancelled.cancelled_at is not None
    assert cancelled.request_counts is not None and cancelled.request_counts.completed < 400
    listed = [b.id for b in client.batches.list(limit=100)]
    assert listed.index(other.id) < listed.index(batch.id)  # newest first
