"""Adapter requests in the conformance suite: requests naming a LoRA adapter as `model`, sent to
bare vLLM serving the same adapters (`--enable-lora --lora-modules NAME=PATH ...`, the
replica's slots and rank) and to the deployment, whose replicas load them at run time. A
conforming deployment answers them as bare vLLM does: the same tokens (greedy or seeded), the
adapter's name as `model`, and the same `/v1/models` list of base model and adapters."""

from __future__ import annotations

from typing import Any

from shared.domain.adapter import AdapterSpec
from slomesh.conformance.corpus import Case

_HELLO = [{"role": "user", "content": "Hello, who are you?"}]


def replica_adapters(replica: dict[str, Any]) -> list[AdapterSpec]:
    """The adapters a replica's Serve args list (none: [])."""
    return [AdapterSpec.model_validate(s) for s in (replica.get("adapters") or {}).get("specs", [])]


def lora_cli_args(replica: dict[str, Any]) -> list[str]:
    """bare vLLM's flags serving the replica's adapters as it does: LoRA on with its slots and
    rank, each adapter a static module under its name (the path expanded, as the replica
    loads it)."""
    specs = replica_adapters(replica)
    if not specs:
        return []
    cfg = replica.get("adapters") or {}
    return [
        "--enable-lora",
        "--max-loras",
        str(cfg.get("slots", 1)),
        "--max-lora-rank",
        str(cfg.get("max_lora_rank", 16)),
        "--lora-modules",
        *(f"{s.name}={s.local_path}" for s in specs),
    ]


def adapter_cases(names: list[str]) -> list[Case]:
    """Greedy and seeded chat and completions, streamed and not, through each adapter in turn
    (with more adapters than slots the deployment unloads and reloads between them), and one
    unknown adapter name."""
    cases: list[Case] = []
    for name in names:
        chat = {"model": name, "messages": _HELLO, "max_tokens": 10, "temperature": 0}
        comp = {"model": name, "prompt": "The adapter says", "max_tokens": 10, "temperature": 0}
        seeded = {**comp, "temperature": 1.0, "seed": 11, "n": 2}
        cases += [
            Case(f"adapter/{name}/chat", "/v1/chat/completions", chat),
            Case(f"adapter/{name}/chat/stream", "/v1/chat/completions", {**chat, "stream": True}),
            Case(f"adapter/{name}/completions", "/v1/completions", comp),
            Case(f"adapter/{name}/completions/seeded-n2", "/v1/completions", seeded),
        ]
    if names:
        missing = {"model": f"{names[0]}-missing", "prompt": "x", "max_tokens": 2}
        cases.append(Case("adapter/unknown-name", "/v1/completions", missing))
    return cases
