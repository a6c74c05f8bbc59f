"""Local test artefacts a mesh config names, built before the mesh starts (`slomesh up`).

Nothing is downloaded. The LoRA adapters a config lists (a replica's `adapters.specs`, an
ingress model's `adapters`) that are marked `random_weights` and missing are built with random
weights over their base model (`build_tiny_adapter`): a replica's base is its vLLM `model` (a
simulated replica's `tokenizer_model`), an ingress model's its `tokenizer`; the default tiny
model is built first when it is that base and missing. An adapter that is missing and not
`random_weights` is an error naming where the config lists it: a trained adapter cannot be made
up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shared.domain.adapter import AdapterSpec

_REPLICA = "services.replica.deployment:build_app"
_INGRESS = "services.ingress.deployment:build_app"


def adapters_of(config: dict[str, Any]) -> list[tuple[str, AdapterSpec, str | None]]:
    """(where, adapter, base model directory) for every adapter the config lists."""
    found: list[tuple[str, AdapterSpec, str | None]] = []
    for app in config.get("applications", []):
        args = app.get("args") or {}
        name = app.get("name", "?")
        if app.get("import_path") == _REPLICA:
            vllm = args.get("vllm") or {}
            base = vllm.get("model") if args.get("engine") == "vllm" else None
            base = base or args.get("tokenizer_model")
            for spec in (args.get("adapters") or {}).get("specs", []):
                found.append((f"{name}.adapters.specs", AdapterSpec.model_validate(spec), base))
        elif app.get("import_path") == _INGRESS:
            for model in args.get("models", []):
                where = f"{name}.models[{model.get('name')}].adapters"
                for spec in model.get("adapters", []):
                    found.append((where, AdapterSpec.model_validate(spec), model.get("tokenizer")))
    return found


def build_missing(config: dict[str, Any]) -> list[Path]:
    """Build the missing random-weight adapters `config` lists; the paths built. Raises
    ValueError naming a missing adapter that is not random_weights, or one without a base."""
    from services.replica.vllm.tiny_adapter import ADAPTER_CONFIG, build_tiny_adapter
    from services.replica.vllm.tiny_model import build_tiny_model, default_tiny_model_dir

    built: list[Path] = []
    for where, spec, base in adapters_of(config):
        path = Path(spec.local_path)
        if path in built or (path / ADAPTER_CONFIG).is_file():
            continue
        if not spec.random_weights:
            raise ValueError(
                f"{where}: adapter {spec.name!r} has no adapter at {path} (set random_weights "
                "to build a test adapter there; a trained one must be put there)"
            )
        if base is None:
            raise ValueError(f"{where}: adapter {spec.name!r} needs a base model directory")
        base_dir = Path(base).expanduser()
        if base_dir == default_tiny_model_dir() and not (base_dir / "config.json").is_file():
            build_tiny_model(base_dir)
        built.append(build_tiny_adapter(path, base_dir, rank=spec.rank, seed=spec.seed))
    return built
