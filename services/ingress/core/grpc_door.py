"""The ingress's own gRPC server: its settings (the server is services/ingress/grpc_door.py).

Serve's gRPC proxy binds every interface and cannot be told otherwise, so the gRPC `Ingress`
service is served by each ingress replica itself on `host:port`, loopback by default, every
replica of a node on one port (SO_REUSEPORT), as the HTTP front door does.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from services.ingress.core.front_door import NODE_ADDRESS, listen_host, url_host


class GrpcDoorConfig(BaseModel):
    """Where and how the ingress replicas serve the gRPC `Ingress` service (`grpc_door` of the
    ingress's args)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Serve `Ingress.Generate` from each ingress replica on `host:port`."""
    host: str = "127.0.0.1"
    """Address to bind: an IPv4/IPv6 literal ("0.0.0.0" for every interface) or "node" (this
    Ray node's address, for clients on other machines)."""
    port: int = Field(9100, ge=1, le=65535)
    """TCP port every ingress replica of a node shares (SO_REUSEPORT)."""
    max_in_flight_requests: int | None = Field(None, ge=1)
    """`Generate` calls one replica serves at once; beyond it a call is answered
    RESOURCE_EXHAUSTED at once. None: the same limit as the HTTP front door's."""
    graceful_shutdown_s: float = Field(5.0, ge=0, le=600)
    """When the replica stops: no new calls, calls in flight get this long (seconds)."""

    @field_validator("host")
    @classmethod
    def _host_is_an_address(cls, value: str) -> str:
        return listen_host(value, "grpc_door.host")


def grpc_target(config: GrpcDoorConfig, node_address: str = "127.0.0.1") -> str:
    """The `host:port` a gRPC client on this machine dials (`node_address` stands in for
    "node")."""
    host = node_address if config.host == NODE_ADDRESS else config.host
    return f"{url_host(host)}:{config.port}"
