"""Model files of the learned length predictor on disk (the I/O around core/learned/codec.py).

A model is saved as `<name>.npz` (the model file: arrays plus embedded JSON metadata, no pickle)
and a `<name>.json` copy of the metadata for people to read; loading uses the .npz alone.
The shipped default model is package data: services/predictor/models/default.npz.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from services.predictor.core.base import PredictorKind
from services.predictor.core.learned.predictor import LearnedConfig, LearnedPredictor

DEFAULT_MODEL_RESOURCE = "models/default.npz"
"""The shipped model, relative to the services.predictor package."""

DEFAULT_MODEL_PATH = Path(__file__).resolve().parent / "models" / "default.npz"
"""Where `slomesh predictor train` writes by default (the shipped model in a source checkout)."""


def read_model_bytes(path: str | Path | None = None) -> bytes:
    """Bytes of the model file at `path` (None: the shipped default model)."""
    if path is None:
        ref = resources.files("services.predictor").joinpath(DEFAULT_MODEL_RESOURCE)
        if not ref.is_file():
            raise ValueError(
                f"the shipped model {DEFAULT_MODEL_RESOURCE} is missing; "
                "train one with `slomesh predictor train`"
            )
        return ref.read_bytes()
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"model_path: no model file at {p}")
    return p.read_bytes()


def load_model(
    path: str | Path | None = None, config: LearnedConfig | None = None
) -> LearnedPredictor:
    """The learned predictor saved at `path` (None: the shipped default model)."""
    return LearnedPredictor.from_bytes(read_model_bytes(path), config)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def save_model(
    predictor: LearnedPredictor, path: str | Path, extra_info: dict[str, Any] | None = None
) -> tuple[Path, Path]:
    """Write `path` (.npz) and its .json metadata; returns both paths.

    `extra_info` (JSON-able, e.g. held-out metrics) is merged into the model's info first.
    """
    p = Path(path)
    if p.suffix != ".npz":
        raise ValueError(f"--out must end in .npz, got {p}")
    p.parent.mkdir(parents=True, exist_ok=True)
    if extra_info:
        predictor.info.update(extra_info)
    _write_atomic(p, predictor.to_bytes())
    meta = p.with_suffix(".json")
    text = json.dumps(predictor.metadata(), indent=2, sort_keys=True) + "\n"
    _write_atomic(meta, text.encode())
    return p, meta


def learned_from_config(config: Mapping[str, Any] | None = None) -> LearnedPredictor:
    """Load config["model_path"] (None: the shipped default model) with these knobs. File I/O
    stays here in the shell; the pure predictor only decodes bytes."""
    cfg = LearnedConfig.model_validate(dict(config or {}))
    return LearnedPredictor.from_bytes(read_model_bytes(cfg.model_path), cfg)


LEARNED = PredictorKind(
    name=LearnedPredictor.name,
    create=learned_from_config,
    restore=LearnedPredictor.from_state,
)
"""The learned predictor as the registry builds it (services/predictor/core/registry.py)."""
