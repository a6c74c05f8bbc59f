"""The ingress replicas' own doors in a mesh config (services/ingress/front_door.py and
grpc_door.py): where they answer, whether the HTTP door's port is free, and waiting until the
doors answer."""

from __future__ import annotations

import time
from typing import Any

from services.ingress.core.front_door import FrontDoorConfig, base_url
from services.ingress.core.grpc_door import GrpcDoorConfig, grpc_target
from slomesh.launch.ports import port_taken

INGRESS_IMPORT_PATH = "services.ingress.deployment:build_app"


def door_config(config: dict[str, Any]) -> FrontDoorConfig | None:
    """The ingress application's `front_door` settings; None when it has none enabled (or the
    config has no ingress)."""
    for app in config.get("applications", []):
        if app.get("import_path") == INGRESS_IMPORT_PATH:
            door = FrontDoorConfig.model_validate((app.get("args") or {}).get("front_door", {}))
            return door if door.enabled else None
    return None


def grpc_door_target(config: dict[str, Any]) -> str | None:
    """host:port of the ingress replicas' own gRPC server on this machine, or None."""
    for app in config.get("applications", []):
        if app.get("import_path") == INGRESS_IMPORT_PATH:
            args = (app.get("args") or {}).get("grpc_door", {})
            door = GrpcDoorConfig.model_validate(args)
            return grpc_target(door) if door.enabled else None
    return None


def door_url(config: dict[str, Any]) -> str | None:
    """OpenAI base URL of the ingress replicas' own door on this machine, or None."""
    door = door_config(config)
    return base_url(door) if door is not None else None


def door_port_taken(config: dict[str, Any]) -> str | None:
    """Why the door's port cannot be used (another socket listens there), or None. The bind is
    without SO_REUSEPORT, so any other listener fails it (a second mesh's door included)."""
    door = door_config(config)
    if door is None:
        return None
    host = "0.0.0.0" if door.host == "node" else door.host
    why = port_taken(host, door.port)
    if why is None:
        return None
    return (
        f"ingress front_door.port: port {door.port} on {host} is taken ({why}); "
        "stop the other mesh or program, or set the ingress's front_door.port"
    )


def wait_for_door(config: dict[str, Any], timeout_s: float = 60.0) -> None:
    """Wait until the HTTP door answers `/v1/models` (200, or 503 while no replica of a model is
    ready) and the gRPC door accepts a connection
    (the replicas start serving just after Serve reports them running)."""
    import grpc
    import httpx

    deadline = time.monotonic() + timeout_s
    url = door_url(config)
    while url is not None:
        try:
            # 503 answers too: the door is up while the replicas warm up (readiness.py)
            if httpx.get(f"{url}/models", timeout=5).status_code in (200, 503):
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the ingress's front door {url} did not answer in {timeout_s:.0f} s"
            )
        time.sleep(0.2)
    target = grpc_door_target(config)
    if target is None:
        return
    with grpc.insecure_channel(target) as channel:
        try:
            grpc.channel_ready_future(channel).result(timeout=max(deadline - time.monotonic(), 1))
        except grpc.FutureTimeoutError:
            raise RuntimeError(
                f"the ingress's gRPC door {target} did not answer in {timeout_s:.0f} s"
            ) from None
