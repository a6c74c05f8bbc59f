"""LoRA adapters on the real vLLM CPU engine: the random-weight adapters built here load through
vLLM's own loader and runtime mechanism (AdapterSlots over the replica's OpenAI application),
change the base model's greedy output, give the same output each time, and swap in one slot."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.domain import SLO, Request
from shared.rpc.slomesh.v1 import replica_pb2

pytest.importorskip("vllm")


def test_vllms_loader_reads_the_built_adapter(tiny_model_dir: Path, tmp_path: Path) -> None:
    from vllm.config.lora import LoRAConfig
    from vllm.lora.lora_model import LoRAModel
    from vllm.lora.peft_helper import PEFTHelper

    from services.replica.vllm.tiny_adapter import DEFAULT_TARGET_MODULES, build_tiny_adapter

    path = build_tiny_adapter(tmp_path / "a", tiny_model_dir, rank=8, seed=1)
    helper = PEFTHelper.from_local_dir(str(path), 2048)
    helper.validate_legal(LoRAConfig(max_lora_rank=8))
    lora = LoRAModel.from_local_checkpoint(
        str(path), set(DEFAULT_TARGET_MODULES), helper, lora_model_id=1, device="cpu"
    )
    assert lora.rank == 8 and len(lora.loras) == 2 * len(DEFAULT_TARGET_MODULES)
    with pytest.raises(ValueError, match="greater than max_lora_rank"):
        PEFTHelper.from_local_dir(
            str(build_tiny_adapter(tmp_path / "big", tiny_model_dir, rank=32)), 2048
        ).validate_legal(LoRAConfig(max_lora_rank=16))


@pytest.fixture(scope="module")
def serving(
    tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory, arun: Any
) -> Iterator[Any]:
    from services.replica.adapters import ReplicaAdapters
    from services.replica.openai_serving import vllm_serving
    from services.replica.vllm.config import VLLMEngineConfig
    from services.replica.vllm.engine import VLLMEngine
    from services.replica.vllm.openai_app import ServingOptions
    from services.replica.vllm.tiny_adapter import build_tiny_adapter
    from shared.domain.adapter import AdapterSpec

    root = tmp_path_factory.mktemp("adapters")
    specs = [
        AdapterSpec(
            name=f"tiny-{n}", path=str(build_tiny_adapter(root / n, tiny_model_dir, seed=i))
        )
        for i, n in enumerate(("a", "b"))
    ]
    adapters = ReplicaAdapters(specs=specs, slots=1)
    config = VLLMEngineConfig(
        model=str(tiny_model_dir),
        served_model_name="tiny",
        max_model_len=512,
        max_num_seqs=2,
        kv_cache_memory_bytes=32 << 20,
        **adapters.engine_settings(),
    )

    async def start() -> Any:
        engine = VLLMEngine(config)
        return engine, await vllm_serving(engine, "tiny", ServingOptions(), adapters)

    engine, serve = arun(start(), timeout_s=300)
    yield serve
    arun(engine.shutdown())


def _complete(arun: Any, serving: Any, model: str, adapter: str | None, rid: str) -> str:
    body = {"model": model, "prompt": "Hello world, the model", "max_tokens": 8, "temperature": 0}
    http = replica_pb2.HttpCall(
        method="POST", path="/v1/completions", body=json.dumps(body).encode()
    )
    http.headers.add(name="content-type", value="application/json")
    request = Request(rid, "tiny", 8, 8, 0.0, SLO(3600.0), adapter=adapter)

    async def run() -> list[Any]:
        return [c async for c in serving.serve(request, http)]

    chunks = arun(run(), timeout_s=120)
    out = json.loads(b"".join(c.body for c in chunks))
    assert chunks[0].http_status == 200, out
    assert out["model"] == model
    return str(out["choices"][0]["text"])


def test_adapters_change_the_output_deterministically_and_swap_in_one_slot(
    serving: Any, arun: Any
) -> None:
    base = _complete(arun, serving, "tiny", None, "base")
    a1 = _complete(arun, serving, "tiny-a", "tiny-a", "a1")
    b = _complete(arun, serving, "tiny-b", "tiny-b", "b")
    a2 = _complete(arun, serving, "tiny-a", "tiny-a", "a2")
    assert len({base, a1, b}) == 3  # each adapter changes the greedy tokens
    assert a1 == a2  # reloaded after b took the slot, the same weights again
    slots = serving.adapters
    assert slots.names() == ["tiny-a"] and slots.unloads == 2
    assert len(slots.load_times_s) == 3 and all(t > 0 for t in slots.load_times_s)
