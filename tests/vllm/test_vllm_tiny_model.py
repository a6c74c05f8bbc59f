"""The tiny random-weight model and the vLLM engine config (no vLLM engine started here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from services.replica.vllm.config import VLLMEngineConfig
from services.replica.vllm.tiny_model import METADATA_FILE, build_tiny_model, default_tiny_model_dir


def test_tiny_model_loads_with_transformers(tiny_model_dir: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    text = "Hello world, the replica serves 42 requests!"
    ids = tok(text)["input_ids"]
    assert ids[0] == tok.bos_token_id
    assert tok.decode(ids, skip_special_tokens=True) == text
    assert (tok.bos_token, tok.eos_token, tok.pad_token) == ("<s>", "</s>", "<pad>")

    messages = [{"role": "user", "content": "hi there"}]
    rendered = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert rendered == "<s><|user|>\nhi there</s>\n<|assistant|>\n"

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert model.config.vocab_size == len(tok) and model.config.head_dim >= 32
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits
    assert logits.shape == (1, len(ids), len(tok))
    assert int(logits[0, -1].argmax()) != tok.eos_token_id  # greedy decoding never ends on EOS

    meta = json.loads((tiny_model_dir / METADATA_FILE).read_text())
    assert meta["random_weights"] is True and meta["params"]["seed"] == 0


def test_build_is_idempotent(tiny_model_dir: Path) -> None:
    weights = tiny_model_dir / "model.safetensors"
    before = weights.stat().st_mtime_ns
    assert build_tiny_model(tiny_model_dir) == tiny_model_dir
    assert weights.stat().st_mtime_ns == before


def test_build_leaves_global_rng_alone_and_is_deterministic(tmp_path: Path) -> None:
    import torch
    from safetensors.torch import load_file

    state = torch.random.get_rng_state()
    small = {"vocab_size": 600, "hidden_size": 32, "layers": 1, "heads": 1, "kv_heads": 1}
    a = build_tiny_model(tmp_path / "a", seed=3, **small)
    b = build_tiny_model(tmp_path / "b", seed=3, **small)
    assert torch.equal(state, torch.random.get_rng_state())
    wa, wb = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert (a / "tokenizer.json").read_text() == (b / "tokenizer.json").read_text()
    # other parameters: rebuilt in place
    c = build_tiny_model(tmp_path / "a", seed=4, **small)
    assert json.loads((c / METADATA_FILE).read_text())["params"]["seed"] == 4


def test_default_dir_reads_env_at_call_time(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SLOMESH_MODEL_CACHE", str(tmp_path))
    assert default_tiny_model_dir() == tmp_path / "tiny-llama"
    monkeypatch.delenv("SLOMESH_MODEL_CACHE")
    assert default_tiny_model_dir() == Path.home() / ".cache/slomesh/models/tiny-llama"


def test_config_and_tiny_model_modules_do_not_import_vllm() -> None:
    code = (
        "import sys, services.replica.vllm, services.replica.vllm.config, "
        "services.replica.vllm.tiny_model, services.replica.vllm.slo_metadata\n"
        "heavy = [m for m in ('vllm', 'torch', 'transformers') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])


def test_config_maps_to_engine_args() -> None:
    fcfs = VLLMEngineConfig(model="m", kv_cache_memory_bytes=1 << 20)
    kwargs = fcfs.engine_args_kwargs()
    assert "scheduler_cls" not in kwargs and kwargs["kv_cache_memory_bytes"] == 1 << 20
    assert "served_model_name" not in kwargs and fcfs.active_model == "m"

    edf = VLLMEngineConfig(model="m", served_model_name="tiny", queue_policy="edf")
    kwargs = edf.engine_args_kwargs()
    assert kwargs["scheduler_cls"] == "services.replica.vllm.scheduler_hook.SLOMeshScheduler"
    assert kwargs["additional_config"] == {"slomesh_queue_policy": "edf"}
    assert kwargs["scheduling_policy"] == "priority" and edf.active_model == "tiny"

    with pytest.raises(ValidationError, match="unknown queue policy"):
        VLLMEngineConfig(model="m", queue_policy="no-such-policy")
