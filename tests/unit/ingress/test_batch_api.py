"""The Batch API routes in process, through the official `openai` client (unmodified, over the
FastAPI app's TestClient), with the batch run by the replica's own runner and executor over the
ingress pipeline (the mesh a test double): files.create, batches.create/retrieve/list/cancel,
files.content, and the validation errors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from batch_doubles import batch_jsonl
from conftest import FakeMesh, build_ingress
from fastapi.testclient import TestClient

from services.ingress.batch_executor import batch_slo


@pytest.fixture
def setup(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[tuple[openai.OpenAI, Any]]:
    app, instance = build_ingress(
        monkeypatch, FakeMesh(), batch={"storage_dir": str(tmp_path), "min_window_s": 1}
    )
    with TestClient(app, raise_server_exceptions=False) as http:
        client = openai.OpenAI(base_url="http://testserver/v1", api_key="k", http_client=http)
        yield client, instance


def _run(instance: Any, batch_id: str) -> None:
    asyncio.run(instance.batches.runner.run_batch(batch_id))


@pytest.mark.parametrize("url", ["/v1/completions", "/v1/chat/completions"])
def test_openai_client_round_trip(setup: tuple[openai.OpenAI, Any], url: str) -> None:
    client, instance = setup
    file = client.files.create(file=("in.jsonl", batch_jsonl(5, url)), purpose="batch")
    assert file.object == "file" and file.purpose == "batch" and file.bytes > 0
    assert client.files.retrieve(file.id).id == file.id
    batch = client.batches.create(input_file_id=file.id, endpoint=url, completion_window="24h")
    assert batch.status == "validating" and batch.expires_at == batch.created_at + 86_400
    _run(instance, batch.id)
    done = client.batches.retrieve(batch.id)
    assert done.status == "completed" and done.output_file_id and done.error_file_id is None
    assert done.request_counts is not None
    assert (done.request_counts.total, done.request_counts.completed) == (5, 5)
    lines = [json.loads(x) for x in client.files.content(done.output_file_id).text.splitlines()]
    assert [x["custom_id"] for x in lines] == [f"r{i}" for i in range(5)]
    kind = "chat.completion" if "chat" in url else "text_completion"
    assert all(x["response"]["body"]["object"] == kind for x in lines)
    assert all(x["response"]["body"]["usage"]["completion_tokens"] == 3 for x in lines)


def test_list_pages_and_cancel(setup: tuple[openai.OpenAI, Any]) -> None:
    client, instance = setup
    file = client.files.create(file=("in.jsonl", batch_jsonl(3)), purpose="batch")
    ids = [
        client.batches.create(
            input_file_id=file.id, endpoint="/v1/completions", completion_window="1h"
        ).id
        for _ in range(5)
    ]
    page = client.batches.list(limit=2)
    assert [b.id for b in page.data] == ids[::-1][:2] and page.has_more
    assert [b.id for b in client.batches.list(limit=2)] == ids[::-1]  # follows `after`
    cancelled = client.batches.cancel(ids[0])
    assert cancelled.status == "cancelling"
    _run(instance, ids[0])
    final = client.batches.retrieve(ids[0])
    assert final.status == "cancelled" and final.cancelled_at is not None
    assert client.batches.cancel(ids[0]).status == "cancelled"  # idempotent
    _run(instance, ids[1])
    assert client.batches.retrieve(ids[1]).status == "completed"
    with pytest.raises(openai.ConflictError):
        client.batches.cancel(ids[1])


@pytest.mark.parametrize(
    ("content", "purpose", "param"),
    [
        (b'{"custom_id":"a","method":"GET","url":"/v1/completions","body":{}}', "batch", "method"),
        (b'{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{}}', "batch", "url"),
        (
            b'{"custom_id":"a","method":"POST","url":"/v1/completions","body":{"stream":true}}',
            "batch",
            "body.stream",
        ),
        (batch_jsonl(1) + batch_jsonl(1), "batch", "custom_id"),
        (b"not json", "batch", "line 1"),
        (b"", "batch", "file"),
        (batch_jsonl(1), "fine-tune", "purpose"),
    ],
    ids=["method", "url", "body", "duplicate-id", "json", "empty", "purpose"],
)
def test_upload_validation(
    setup: tuple[openai.OpenAI, Any], content: bytes, purpose: str, param: str
) -> None:
    client, _ = setup
    with pytest.raises(openai.BadRequestError) as err:
        client.files.create(file=("in.jsonl", content), purpose=purpose)  # type: ignore[arg-type]
    body = err.value.body
    assert isinstance(body, dict) and param in (body.get("param") or "")


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"completion_window": "2d"}, "completion_window"),
        ({"endpoint": "/v1/embeddings"}, "endpoint"),
        ({"input_file_id": "file-nope"}, "input_file_id"),
    ],
)
def test_create_validation(
    setup: tuple[openai.OpenAI, Any], change: dict[str, str], param: str
) -> None:
    client, _ = setup
    file = client.files.create(file=("in.jsonl", batch_jsonl(1)), purpose="batch")
    args = {"input_file_id": file.id, "endpoint": "/v1/completions", "completion_window": "24h"}
    with pytest.raises(openai.BadRequestError) as err:
        client.batches.create(**(args | change))  # type: ignore[arg-type]
    assert isinstance(err.value.body, dict) and err.value.body.get("param") == param


def test_unknown_ids_are_404(setup: tuple[openai.OpenAI, Any]) -> None:
    client, _ = setup
    with pytest.raises(openai.NotFoundError):
        client.batches.retrieve("batch_nope")
    with pytest.raises(openai.NotFoundError):
        client.files.content("file-nope")


@pytest.mark.parametrize(
    ("left_s", "ttft_s", "e2e_s"),
    [(86_400.0, 86_400.0, 86_400.0), (3_659.0, 3_600.0, 3_659.0), (42.0, 42.0, 42.0)],
)
def test_batch_slo_is_the_window(left_s: float, ttft_s: float, e2e_s: float) -> None:
    """A batch request's deadline is the batch's expiry; its TTFT deadline is rounded down to
    a minute so one batch's requests share a QLM partition."""
    slo = batch_slo(1_000.0 + left_s, 1_000.0)
    assert (slo.ttft_deadline_s, slo.e2e_deadline_s, slo.class_name) == (ttft_s, e2e_s, "batch")


class _RecordingMesh(FakeMesh):
    """FakeMesh that keeps every scheduler.Admit request."""

    def __init__(self) -> None:
        super().__init__()
        self.admits: list[Any] = []

    async def call(self, application: str, kind: str, method: str, message: Any, *a: Any) -> Any:
        if method == "Admit":
            self.admits.append(message)
        return await super().call(application, kind, method, message, *a)


def test_batch_requests_enter_admission_in_the_lowest_band(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    mesh = _RecordingMesh()
    app, instance = build_ingress(monkeypatch, mesh, batch={"storage_dir": str(tmp_path)})
    with TestClient(app, raise_server_exceptions=False) as http:
        client = openai.OpenAI(base_url="http://testserver/v1", api_key="k", http_client=http)
        file = client.files.create(file=("in.jsonl", batch_jsonl(3)), purpose="batch")
        batch = client.batches.create(
            input_file_id=file.id, endpoint="/v1/completions", completion_window="2h"
        )
        _run(instance, batch.id)
    metas = [m.meta for m in mesh.admits]
    assert len(metas) == 3
    # the band orders batch lines; the body's priority (vLLM's meaning) stays the line's own
    # the sheddable band and the engine's last place (BatchConfig.priority)
    assert {(m.criticality, m.priority, m.slo.class_name) for m in metas} == {(-1, 1000, "batch")}
    assert all(7_140_000 <= m.slo.deadline_ms <= 7_200_000 for m in metas)  # the 2 h window
    # each line's body goes to vLLM as the same request online would, without streaming
    sent = [json.loads(r.http.body) for r in mesh.forwarded]
    assert [(r.http.path, b["stream"]) for r, b in zip(mesh.forwarded, sent, strict=True)] == [
        ("/v1/completions", False)
    ] * 3
    assert all("vllm_xargs" not in b for b in sent)  # the replica gives vLLM slomesh's metadata
