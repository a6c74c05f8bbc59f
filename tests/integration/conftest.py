"""A real Ray Serve mesh on CPU (simulated engines on the wall clock), one per test session."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slomesh.cli.up import DEFAULT_METRICS_PORT, metrics_url
from slomesh.launch import mesh

TINY = "tiny-llama"
GOLD_KEY = "sk-test-gold"
GOLD = {"max_criticality": 1}


def mesh_config(trace_file: Path, tiny_model: Path) -> dict[str, Any]:
    """The simulated local config (step times x0.02, small admission limits, traced) plus one
    real vLLM (CPU build) replica serving the locally built tiny model."""
    config = copy.deepcopy(mesh.load_config(mesh.CONFIGS["simulated"]))
    vllm_cfg = next(
        a
        for a in mesh.load_config(mesh.CONFIGS["vllm"])["applications"]
        if a["name"] == "replica-0"
    )
    vllm_app = copy.deepcopy(vllm_cfg)
    vllm_app["name"] = "replica-2"
    vllm_app["route_prefix"] = "/replica-2"
    vllm_app["args"]["application"] = "replica-2"
    vllm_app["args"]["vllm"]["model"] = str(tiny_model)
    config["applications"].append(vllm_app)
    # every request traced: the tests read the spans of requests that carry no traceparent
    tracing = {"exporter": "file", "file_path": str(trace_file), "sample_ratio": 1.0}
    for app in config["applications"]:
        args = app.setdefault("args", {})
        args["tracing"] = tracing
        if app["name"].startswith("replica-") and args.get("engine") == "simulated":
            args["step_time_scale"] = 0.02
            args["tokenizer_model"] = str(tiny_model)
        if app["name"] == "scheduler":
            args["max_in_flight_per_replica"] = 4
            args["replicas"].append({"application": "replica-2", "gpu": "cpu", "model": TINY})
        if app["name"] == "ingress":
            args["batch"] = {"storage_dir": str(trace_file.parent / "batches"), "min_window_s": 1}
            # a key that may ask for the critical band (anonymous traffic may not)
            args["api_keys"] = {"keys": {GOLD_KEY: {"tenant": "gold", "entitlement": GOLD}}}
            # find scheduler shards added while the mesh serves (test_mesh_shards.py)
            args["scheduler"] = {"discover": True}
            for model in args["models"]:
                model["tokenizer"] = str(tiny_model)
            args["models"].append(
                {"name": TINY, "max_model_len": 2048, "tokenizer": str(tiny_model)}
            )
    return config


@pytest.fixture(scope="session")
def live_mesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from services.replica.vllm.tiny_model import build_tiny_model

    trace_file = tmp_path_factory.mktemp("traces") / "spans.jsonl"
    tiny = build_tiny_model(tmp_path_factory.mktemp("models") / TINY)
    config = mesh_config(trace_file, tiny)
    mesh.start(config, num_cpus=8, metrics_port=DEFAULT_METRICS_PORT)
    http, grpc_target = mesh.endpoints(config)
    try:
        yield {
            "config": config,
            "http": http,
            "openai": mesh.openai_url(config),
            "grpc": grpc_target,
            "traces": trace_file,
            "metrics": metrics_url(DEFAULT_METRICS_PORT),
        }
    finally:
        mesh.stop()
