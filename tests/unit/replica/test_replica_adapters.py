"""LoRA adapters on a simulated replica through vLLM's own runtime loading: a request naming an
adapter in `model` loads it (vLLM's OpenAIServingModels + the engine core's add_lora) and is
answered under the adapter's name; with one slot the next adapter unloads it; vLLM's
/v1/models lists what is loaded with its base as parent; an adapter the replica does not
have is vLLM's 404."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.replica.adapters import ReplicaAdapters
from services.replica.vllm.tiny_adapter import build_tiny_adapter
from services.replica.vllm.tiny_model import build_tiny_model
from shared.domain import SLO, Request
from shared.domain.adapter import AdapterSpec
from shared.rpc.slomesh.v1 import replica_pb2
from tests.unit.ingress.sim_replica import SimReplica


@pytest.fixture(scope="module")
def replica(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimReplica]:
    root = Path(tmp_path_factory.mktemp("lora"))
    model = build_tiny_model(root / "tiny-llama")
    specs = [
        AdapterSpec(name=f"tiny-{n}", path=str(build_tiny_adapter(root / n, model, seed=i)))
        for i, n in enumerate(("a", "b"))
    ]
    adapters = ReplicaAdapters(specs=specs, slots=1, simulated_load_s=0.0)
    sim = SimReplica.start(model, "llama", 4096, adapters)
    try:
        yield sim
    finally:
        sim.stop()


def _call(replica: SimReplica, method: str, path: str, body: Any, adapter: str | None) -> Any:
    http = replica_pb2.HttpCall(method=method, path=path, body=json.dumps(body).encode())
    http.headers.add(name="content-type", value="application/json")
    request = Request(f"r-{path}-{adapter}", "llama", 8, 16, 0.0, SLO(3600.0), adapter=adapter)

    async def run() -> list[Any]:
        return [c async for c in replica.serve(request, http)]

    chunks = asyncio.run(run())
    status = next(c.http_status for c in chunks if c.http_status)
    return status, json.loads(b"".join(c.body for c in chunks))


def _complete(replica: SimReplica, model: str, adapter: str | None) -> tuple[int, Any]:
    body = {"model": model, "prompt": "hello", "max_tokens": 3, "ignore_eos": True}
    return _call(replica, "POST", "/v1/completions", body, adapter)  # type: ignore[no-any-return]


def test_adapter_requests_load_it_and_one_slot_swaps_them(replica: SimReplica) -> None:
    slots = replica.serving.adapters
    status, out = _complete(replica, "tiny-a", "tiny-a")
    assert status == 200 and out["model"] == "tiny-a"
    assert out["usage"]["completion_tokens"] == 3
    assert slots.names() == ["tiny-a"]
    status, models = _call(replica, "GET", "/v1/models", None, None)
    cards = {m["id"]: m for m in models["data"]}
    assert cards["tiny-a"]["parent"] == "llama" and "tiny-b" not in cards

    status, out = _complete(replica, "tiny-b", "tiny-b")
    assert status == 200 and out["model"] == "tiny-b"
    assert slots.names() == ["tiny-b"] and slots.unloads == 1
    assert len(replica.serving.sim_core.loras) == 1  # the engine core let tiny-a go

    status, out = _complete(replica, "llama", None)  # the base model needs no slot
    assert status == 200 and out["model"] == "llama" and slots.names() == ["tiny-b"]


def test_an_adapter_the_replica_does_not_have_is_vllms_404(replica: SimReplica) -> None:
    status, out = _complete(replica, "tiny-z", "tiny-z")
    assert status == 404 and out["error"]["type"] == "NotFoundError"
    assert "tiny-z" in out["error"]["message"]
