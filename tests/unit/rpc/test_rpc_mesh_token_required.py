"""A deployment whose internal gRPC would fail closed refuses to start without the mesh
credential (so `serve deploy` without SLOMESH_MESH_TOKEN fails to deploy, naming the variable,
instead of turning healthy and failing every request with UNAUTHENTICATED)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.rpc.mesh_auth import MESH_TOKEN_ENV, MeshCredentialMissing, require_mesh_token

REPLICA = {"application": "replica-7", "engine": "simulated", "tracing": {"exporter": "none"}}
SCHEDULER = {
    "replicas": [{"application": "replica-7", "gpu": "A100-80GB", "model": "llama-3.1-8b"}],
    "tracing": {"exporter": "none"},
}


def _replica(args: dict[str, Any]) -> Any:
    from services.replica.deployment import ReplicaDeployment

    return ReplicaDeployment.func_or_class(args)


def _scheduler(args: dict[str, Any]) -> Any:
    from services.scheduler.deployment import SchedulerDeployment

    return SchedulerDeployment.func_or_class(args)


def test_the_refusal_names_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MESH_TOKEN_ENV, raising=False)
    with pytest.raises(MeshCredentialMissing) as err:
        require_mesh_token("the thing")
    message = str(err.value)
    assert message.startswith("the thing needs the mesh credential: set SLOMESH_MESH_TOKEN")
    assert "runtime_env" in message and "UNAUTHENTICATED" in message
    monkeypatch.setenv(MESH_TOKEN_ENV, "s3cret")
    require_mesh_token("the thing")


def test_a_replica_with_its_own_grpc_server_refuses_to_start_without_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(MESH_TOKEN_ENV, raising=False)
    with pytest.raises(MeshCredentialMissing, match=r"replica replica-7 .*SLOMESH_MESH_TOKEN"):
        _replica(REPLICA)  # grpc_host defaults to loopback: callers stream from its server
    assert _replica({**REPLICA, "grpc_host": ""}).args.application == "replica-7"  # handles only
    monkeypatch.setenv(MESH_TOKEN_ENV, "s3cret")
    assert _replica(REPLICA).args.grpc_host == "127.0.0.1"


def test_a_scheduler_calling_over_grpc_refuses_to_start_without_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(MESH_TOKEN_ENV, raising=False)
    with pytest.raises(MeshCredentialMissing, match=r"scheduler \(transport grpc\)"):
        _scheduler({**SCHEDULER, "transport": "grpc"})
    assert _scheduler(SCHEDULER).args.transport == "handle"  # Serve handles: Ray's own auth
