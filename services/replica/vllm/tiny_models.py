"""The tiny base models built locally (tiny_model.py), by served name.

`tiny-llama` is the mesh's default model. `tiny-llama-b` and `tiny-llama-c` have the same shape
and tokenizer with weights from other seeds: three distinct checkpoints vLLM loads separately,
what a replica swapping between base models needs, and the same prompt is the same tokens on
each (one profile of step times fits all three; their swap times are measured, not assumed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from services.replica.vllm.tiny_model import build_tiny_model, default_tiny_model_dir

TINY_BASE_MODELS: dict[str, dict[str, Any]] = {
    "tiny-llama": {},
    "tiny-llama-b": {"weights_seed": 1},
    "tiny-llama-c": {"weights_seed": 2},
}
"""Served name -> build_tiny_model keyword arguments (the directory is the name)."""


def tiny_model_dir(name: str) -> Path:
    """Where the tiny base model `name` is cached (next to tiny-llama)."""
    if name not in TINY_BASE_MODELS:
        raise ValueError(f"unknown tiny model '{name}' (valid: {', '.join(TINY_BASE_MODELS)})")
    return default_tiny_model_dir().parent / name


def build_named_tiny_model(name: str) -> Path:
    """Build (or reuse) the tiny base model `name`; returns its directory."""
    return build_tiny_model(tiny_model_dir(name), **TINY_BASE_MODELS[name])


def tiny_model_named_by(path: str) -> str | None:
    """The tiny base model whose cache directory `path` is (a config's checkpoint path), if
    any: what `slomesh up --config` builds when it is missing."""
    p = Path(path).expanduser()
    for name in TINY_BASE_MODELS:
        if p == tiny_model_dir(name):
            return name
    return None


def tiny_models_in(config: Any) -> list[str]:
    """The tiny base models a Serve config names (any string value that is one's directory:
    checkpoints, tokenizers), in order of first mention."""
    found: dict[str, None] = {}

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        elif isinstance(x, str) and ("/" in x or x.startswith("~")):
            name = tiny_model_named_by(x)
            if name is not None:
                found.setdefault(name)

    walk(config)
    return list(found)
