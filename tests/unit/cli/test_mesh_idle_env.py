"""The mesh's idle timers: Ray Serve reads the settings `slomesh up` gives its processes, they
are slower than Serve's defaults, and a value set in the environment wins."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from slomesh.launch.mesh import MESH_IDLE_ENV, apply_process_env

_READ = (
    "from ray.serve._private import constants as c; "
    "print(c.CONTROL_LOOP_INTERVAL_S, c.RAY_SERVE_METRICS_EXPORT_INTERVAL_MS)"
)


def _serve_reads(extra: dict[str, str]) -> tuple[float, int]:
    env = {k: v for k, v in os.environ.items() if k not in MESH_IDLE_ENV} | extra
    out = subprocess.run(
        [sys.executable, "-c", _READ], env=env, capture_output=True, text=True, check=True
    )
    loop_s, export_ms = out.stdout.split()
    return float(loop_s), int(export_ms)


def test_serve_reads_the_mesh_idle_settings_and_they_are_slower_than_its_defaults() -> None:
    default_loop_s, default_export_ms = _serve_reads({})
    loop_s, export_ms = _serve_reads(MESH_IDLE_ENV)
    assert (loop_s, export_ms) == (
        float(MESH_IDLE_ENV["RAY_SERVE_CONTROL_LOOP_INTERVAL_S"]),
        int(MESH_IDLE_ENV["RAY_SERVE_METRICS_EXPORT_INTERVAL_MS"]),
    )
    assert loop_s > default_loop_s and export_ms > default_export_ms


def test_a_setting_from_the_environment_wins() -> None:
    environ = {"RAY_SERVE_CONTROL_LOOP_INTERVAL_S": "0.1"}
    apply_process_env(environ)
    assert environ["RAY_SERVE_CONTROL_LOOP_INTERVAL_S"] == "0.1"
    assert environ["RAY_SERVE_METRICS_EXPORT_INTERVAL_MS"] == "1000"
    assert environ["RAY_SERVE_USE_GRPC_BY_DEFAULT"] == "1"


def test_the_hand_started_cluster_page_exports_the_same_settings() -> None:
    page = (Path(__file__).parents[3] / "docs/operations/ray-cluster.md").read_text()
    for key, value in MESH_IDLE_ENV.items():
        assert f"{key}={value}" in page, key
