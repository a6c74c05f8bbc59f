"""`slomesh up` builds the random-weight adapters a config lists and lacks (once, whether a
replica or the ingress lists it), leaves existing ones alone, and refuses a missing adapter
that is not random_weights, naming where the config lists it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from services.replica.vllm.tiny_model import build_tiny_model
from slomesh.cli.artefacts import build_missing


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    small = {"vocab_size": 600, "hidden_size": 32, "layers": 1, "heads": 1, "kv_heads": 1}
    return build_tiny_model(tmp_path_factory.mktemp("m") / "tiny", **small)


def _config(base: Path, adapter: dict[str, Any]) -> dict[str, Any]:
    replica = {
        "name": "replica-0",
        "import_path": "services.replica.deployment:build_app",
        "args": {"engine": "vllm", "vllm": {"model": str(base)}, "adapters": {"specs": [adapter]}},
    }
    ingress = {
        "name": "ingress",
        "import_path": "services.ingress.deployment:build_app",
        "args": {"models": [{"name": "m", "tokenizer": str(base), "adapters": [adapter]}]},
    }
    return {"applications": [replica, ingress]}


def test_builds_missing_random_adapters_once_then_reuses_them(base: Path, tmp_path: Path) -> None:
    adapter = {"name": "m-sql", "path": str(tmp_path / "sql"), "random_weights": True, "rank": 8}
    assert build_missing(_config(base, adapter)) == [tmp_path / "sql"]
    assert (tmp_path / "sql" / "adapter_model.safetensors").is_file()
    assert build_missing(_config(base, adapter)) == []  # there now: nothing to build


def test_a_missing_trained_adapter_is_an_error_naming_it(base: Path, tmp_path: Path) -> None:
    adapter = {"name": "m-sql", "path": str(tmp_path / "nope")}
    with pytest.raises(ValueError, match=r"replica-0\.adapters\.specs: adapter 'm-sql'"):
        build_missing(_config(base, adapter))
