"""LoRA adapters at the ingress: a client names an adapter as `model`; the request is scheduled
on its base model with the adapter in its metadata (the replica loads it), the body reaches vLLM
naming the adapter; /v1/models lists the adapters as vLLM does (root the adapter's path, parent
the base model); an unknown name is the 404 naming the adapters too; names are unique."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from services.ingress.args import IngressArgs
from services.ingress.core import ModelInfo, Principal
from services.ingress.core.request_meta import admission_request
from services.ingress.core.request_view import read_view
from shared.domain import SLO
from tests.unit.ingress.conftest import MODELS, FakeMesh, build_ingress

ADAPTERS = [{"name": "llama-sql", "path": "~/adapters/sql"}, {"name": "llama-poem", "path": "/p"}]
WITH_ADAPTERS = [{**MODELS[0], "adapters": ADAPTERS}, MODELS[1]]


def _client(monkeypatch: pytest.MonkeyPatch, mesh: FakeMesh) -> TestClient:
    app, _ = build_ingress(monkeypatch, mesh, models=WITH_ADAPTERS)
    return TestClient(app, raise_server_exceptions=False)


def test_an_adapter_request_runs_on_its_base_model_with_the_adapter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mesh = FakeMesh(served=("llama", "qwen", "llama-sql"))
    client = _client(monkeypatch, mesh)
    body = {"model": "llama-sql", "prompt": "select", "max_tokens": 3}
    answer = client.post("/v1/completions", json=body)
    assert answer.status_code == 200, answer.text
    sent = mesh.forwarded[-1]
    assert (sent.meta.model, sent.meta.adapter) == ("llama", "llama-sql")
    assert json.loads(sent.http.body)["model"] == "llama-sql"  # vLLM serves it by name

    client.post("/v1/completions", json={**body, "model": "llama"})
    assert (mesh.forwarded[-1].meta.model, mesh.forwarded[-1].meta.adapter) == ("llama", "")


def test_models_lists_adapters_as_vllm_does(monkeypatch: pytest.MonkeyPatch) -> None:
    client = _client(monkeypatch, FakeMesh())
    cards = {m["id"]: m for m in client.get("/v1/models").json()["data"]}
    assert list(cards) == ["llama", "qwen", "llama-sql", "llama-poem"]
    sql = cards["llama-sql"]
    assert sql["parent"] == "llama" and sql["max_model_len"] is None
    assert sql["root"].endswith("/adapters/sql") and not sql["root"].startswith("~")
    assert cards["llama"]["parent"] is None


def test_unknown_name_is_404_naming_the_base_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM's 404 for an unknown model lists the served base models as the valid aliases, not
    the LoRA adapters (the live conformance case against bare vLLM with the same adapters)."""
    client = _client(monkeypatch, FakeMesh())
    answer = client.post("/v1/completions", json={"model": "llama-nope", "prompt": "x"})
    assert answer.status_code == 404
    message = answer.json()["error"]["message"]
    assert "Valid aliases: llama" in message and "llama-sql" not in message


def test_admission_request_maps_the_adapter_to_its_base() -> None:
    models = {"m": ModelInfo("m", 100), "m-a": ModelInfo("m-a", 100, "m")}
    view = read_view("/v1/completions", {"model": "m-a", "max_tokens": 5}, "m")
    req = admission_request(
        request_id="r",
        view=view,
        principal=Principal("t"),
        slo=SLO(1.0),
        prompt_tokens=4,
        models=models,
        arrival_s=0.0,
    )
    assert (req.model, req.adapter, req.max_tokens) == ("m", "m-a", 5)


@pytest.mark.parametrize(
    "models",
    [
        [{**MODELS[0], "adapters": [{"name": "qwen", "path": "/x"}]}, MODELS[1]],
        [{**MODELS[0], "adapters": [ADAPTERS[0], ADAPTERS[0]]}],
    ],
)
def test_names_clients_use_are_unique(models: list[dict[str, object]]) -> None:
    with pytest.raises(ValidationError, match="already a model or adapter name"):
        IngressArgs.model_validate({"models": models})


def test_batch_lines_naming_an_adapter_run_with_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import asyncio

    from tests.unit.ingress.batch_doubles import batch_jsonl

    mesh = FakeMesh(served=("llama", "qwen", "llama-sql"))
    batch = {"storage_dir": str(tmp_path), "min_window_s": 1}
    app, instance = build_ingress(monkeypatch, mesh, models=WITH_ADAPTERS, batch=batch)
    with TestClient(app, raise_server_exceptions=False) as http:
        files = {"file": ("in.jsonl", batch_jsonl(3, model="llama-sql"), "application/jsonl")}
        file_id = http.post("/v1/files", files=files, data={"purpose": "batch"}).json()["id"]
        body = {"input_file_id": file_id, "endpoint": "/v1/completions", "completion_window": "1h"}
        batch_id = http.post("/v1/batches", json=body).json()["id"]
        asyncio.run(instance.batches.runner.run_batch(batch_id))
        done = http.get(f"/v1/batches/{batch_id}").json()
        output = http.get(f"/v1/files/{done['output_file_id']}/content").text
    assert done["status"] == "completed" and done["request_counts"]["completed"] == 3
    lines = [json.loads(x) for x in output.splitlines()]
    assert {x["response"]["body"]["model"] for x in lines} == {"llama-sql"}
    assert [(r.meta.model, r.meta.adapter) for r in mesh.forwarded] == [("llama", "llama-sql")] * 3
