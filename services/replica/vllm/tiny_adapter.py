"""Random-weight LoRA adapters for a local base model, in the PEFT format vLLM loads.

Nothing is downloaded: the adapter's shapes come from the base model's `config.json` (a Llama
layout: attention projections q/k/v/o, MLP projections gate/up/down), its weights from a seeded
local `torch.Generator`. The directory holds what `peft` saves and vLLM's LoRA loader reads
(`PEFTHelper.from_local_dir`, `LoRAModel.from_local_checkpoint`): `adapter_config.json` and
`adapter_model.safetensors` with tensors named
`base_model.model.model.layers.{i}.{self_attn|mlp}.{module}.lora_{A|B}.weight`.

Unlike a freshly initialised PEFT adapter (lora_B zero, a no-op), both A and B are random, so
the adapter changes the base model's output: a request through it decodes other tokens than
the base model, which is what tests of adapter routing need to tell the two apart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from services.replica.vllm.tiny_model import write_into_place

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
METADATA_FILE = "slomesh_tiny_adapter.json"
ATTENTION_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_MODULES = ("gate_proj", "up_proj", "down_proj")
DEFAULT_TARGET_MODULES = (*ATTENTION_MODULES, *MLP_MODULES)
_FORMAT_VERSION = 1


def module_shapes(config: dict[str, Any], module: str) -> tuple[int, int]:
    """(in_features, out_features) of one Llama projection, from the base model's config."""
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads", heads))
    head_dim = int(config.get("head_dim") or hidden // heads)
    inter = int(config["intermediate_size"])
    shapes = {
        "q_proj": (hidden, heads * head_dim),
        "k_proj": (hidden, kv_heads * head_dim),
        "v_proj": (hidden, kv_heads * head_dim),
        "o_proj": (heads * head_dim, hidden),
        "gate_proj": (hidden, inter),
        "up_proj": (hidden, inter),
        "down_proj": (inter, hidden),
    }
    if module not in shapes:
        raise ValueError(f"target module {module!r} is not one of {', '.join(shapes)}")
    return shapes[module]


def build_tiny_adapter(
    out_dir: Path,
    base_model_dir: Path,
    *,
    rank: int = 8,
    seed: int = 0,
    alpha: int | None = None,
    target_modules: tuple[str, ...] = DEFAULT_TARGET_MODULES,
    std: float = 0.05,
) -> Path:
    """Build (or reuse) a random-weight LoRA adapter of `base_model_dir` in `out_dir`.

    Idempotent: a directory holding an adapter built with the same parameters over a base
    model of the same shapes is returned untouched. Built in a temporary sibling directory
    renamed into place, so a crashed build never leaves half an adapter. `alpha` defaults to
    2 x rank (scaling alpha / r = 2); weights are normal with standard deviation `std`.
    """
    if rank < 1:
        raise ValueError(f"rank must be >= 1, got {rank}")
    out_dir = Path(out_dir).expanduser()
    base_model_dir = Path(base_model_dir).expanduser()
    config_path = base_model_dir / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(f"base model {base_model_dir} has no config.json")
    config = json.loads(config_path.read_text())
    layers = int(config["num_hidden_layers"])
    shapes = {m: module_shapes(config, m) for m in target_modules}
    params: dict[str, Any] = {
        "format_version": _FORMAT_VERSION,
        "rank": rank,
        "alpha": alpha if alpha is not None else 2 * rank,
        "seed": seed,
        "std": std,
        "target_modules": list(target_modules),
        "layers": layers,
        "shapes": {m: list(s) for m, s in shapes.items()},
    }
    if _is_complete(out_dir, params):
        return out_dir

    def build(tmp: Path) -> dict[str, Any]:
        _write_adapter(tmp, params, str(base_model_dir))
        return {
            "params": params,
            "base_model": str(base_model_dir),
            "random_weights": True,
            "description": (
                "Random-weight LoRA adapter built by slomesh (services/replica/vllm/"
                "tiny_adapter.py) for CPU tests: A and B drawn from a seeded torch.Generator, "
                "so the adapter changes the base model's output. Its text is meaningless."
            ),
        }

    return write_into_place(out_dir, METADATA_FILE, build)


def _is_complete(out_dir: Path, params: dict[str, Any]) -> bool:
    files = (ADAPTER_CONFIG, ADAPTER_WEIGHTS, METADATA_FILE)
    if not all((out_dir / f).is_file() for f in files):
        return False
    try:
        meta = json.loads((out_dir / METADATA_FILE).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("params") == params


def _write_adapter(out: Path, params: dict[str, Any], base_model: str) -> None:
    import torch
    from safetensors.torch import save_file

    rank = params["rank"]
    gen = torch.Generator().manual_seed(params["seed"])
    tensors: dict[str, torch.Tensor] = {}
    for layer in range(params["layers"]):
        for module in params["target_modules"]:
            block = "self_attn" if module in ATTENTION_MODULES else "mlp"
            fan_in, fan_out = params["shapes"][module]
            prefix = f"base_model.model.model.layers.{layer}.{block}.{module}"
            a = torch.randn((rank, fan_in), generator=gen) * params["std"]
            b = torch.randn((fan_out, rank), generator=gen) * params["std"]
            tensors[f"{prefix}.lora_A.weight"] = a.contiguous()
            tensors[f"{prefix}.lora_B.weight"] = b.contiguous()
    save_file(tensors, str(out / ADAPTER_WEIGHTS))
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base_model,
        "r": rank,
        "lora_alpha": params["alpha"],
        "lora_dropout": 0.0,
        "target_modules": params["target_modules"],
        "bias": "none",
        "fan_in_fan_out": False,
        "inference_mode": True,
        "modules_to_save": None,
        "use_rslora": False,
        "use_dora": False,
    }
    (out / ADAPTER_CONFIG).write_text(json.dumps(config, indent=2) + "\n")
