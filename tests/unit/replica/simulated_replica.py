"""The arguments of a simulated replica that answers at once, for tests that drive a
ReplicaDeployment in process (no gRPC server)."""

from __future__ import annotations

from typing import Any

SIMULATED_REPLICA_ARGS: dict[str, Any] = {
    "engine": "simulated",
    "model": "llama-3.1-8b",
    "gpu": "A100-80GB",
    "step_time_scale": 0.0,
    "grpc_host": "",
}
