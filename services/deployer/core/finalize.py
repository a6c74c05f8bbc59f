"""Completing a planned Serve config with what the services need besides placements.

The ingress must know the served models (name, context length); each vLLM replica must know
which checkpoint to load for its served model name. Pure: operates on the config dict.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


def finalize(
    config: dict[str, Any],
    checkpoints: Mapping[str, str],
    max_model_len: Mapping[str, int],
    default_max_model_len: int = 4096,
) -> dict[str, Any]:
    """A copy of `config` whose ingress lists the served models and whose vLLM replicas load
    `checkpoints[model]` (a path or hub name; the served name itself when absent)."""
    out = copy.deepcopy(config)
    served: list[str] = []
    for app in out["applications"]:
        args = app.setdefault("args", {})
        if not app["name"].startswith("replica-"):
            continue
        model = args["model"]
        if model not in served:
            served.append(model)
        if args.get("engine") == "vllm":
            vllm = args.setdefault("vllm", {})
            vllm.setdefault("model", checkpoints.get(model, model))
            vllm.setdefault("served_model_name", model)
            vllm.setdefault("max_model_len", max_model_len.get(model, default_max_model_len))
    for app in out["applications"]:
        if app["name"] == "ingress":
            app["args"]["models"] = [
                {"name": m, "max_model_len": max_model_len.get(m, default_max_model_len)}
                for m in served
            ]
    return out
