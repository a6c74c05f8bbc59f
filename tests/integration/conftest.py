"""A real Ray Serve mesh on CPU (simulated engines on the wall clock), one per test session."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.cli import mesh


def mesh_config(trace_file: Path) -> dict[str, Any]:
    """The simulated local config, fast (step times x0.02), small admission limits, traced."""
    config = copy.deepcopy(mesh.load_config(mesh.CONFIGS["simulated"]))
    tracing = {"exporter": "file", "file_path": str(trace_file)}
    for app in config["applications"]:
        args = app.setdefault("args", {})
        args["tracing"] = tracing
        if app["name"].startswith("replica-"):
            args["step_time_scale"] = 0.02
        if app["name"] == "scheduler":
            args["max_in_flight_per_replica"] = 4
    return config


@pytest.fixture(scope="session")
def live_mesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    trace_file = tmp_path_factory.mktemp("traces") / "spans.jsonl"
    config = mesh_config(trace_file)
    mesh.start(config, num_cpus=8)
    http, grpc_target = mesh.endpoints(config)
    try:
        yield {"config": config, "http": http, "grpc": grpc_target, "traces": trace_file}
    finally:
        mesh.stop()
