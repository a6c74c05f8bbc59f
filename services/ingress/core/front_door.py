"""The ingress's own HTTP door: the settings, and the rules that need no socket.

Each ingress replica serves the same OpenAI app itself on `host:port`, next to Serve's HTTP
proxy (which stays on port 8000). Every replica of a
node binds the same address with SO_REUSEPORT, so the kernel spreads new connections over them:
a client talks straight to an ingress process, without the proxy's extra hop for the first
token and for every streamed chunk.
"""

from __future__ import annotations

import ipaddress

from pydantic import BaseModel, ConfigDict, Field, field_validator

NODE_ADDRESS = "node"
"""`host` value meaning this Ray node's own address (multi-node meshes)."""


class FrontDoorConfig(BaseModel):
    """Where and how the ingress replicas serve HTTP themselves (`front_door` of the ingress's
    args)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Serve the OpenAI API from each ingress replica on `host:port` (besides Serve's proxy)."""
    host: str = "127.0.0.1"
    """Address to bind: an IPv4/IPv6 literal ("0.0.0.0" for every interface) or "node" (this
    Ray node's address: each node's replicas bind their own node's, for clients on other
    machines)."""
    port: int = Field(8100, ge=1, le=65535)
    """TCP port every ingress replica of a node shares (SO_REUSEPORT)."""
    max_in_flight_requests: int | None = Field(None, ge=1)
    """HTTP requests one replica serves through this door at once (admission and streaming);
    beyond it a request is answered 429 with Retry-After at once, drop reason
    `ingress-at-capacity`. None: the ingress's max_ongoing_requests + max_queued_at_proxy, the
    most Serve's proxy lets one replica hold."""
    retry_after_s: float = Field(1.0, gt=0, le=3600)
    """Retry-After of that 429, seconds."""
    graceful_shutdown_s: int = Field(5, ge=0, le=600)
    """When the replica stops: the door stops accepting at once and gives requests in flight
    this long (whole seconds: uvicorn takes an int) to finish, then closes their connections."""
    keep_alive_s: int = Field(65, ge=1, le=3600)
    """How long an idle keep-alive connection stays open, seconds (uvicorn's
    timeout_keep_alive). Longer than HTTP clients keep theirs (aiohttp, which vLLM's benchmark
    uses: 60 s; httpx: 5 s): a server that closes first races the client's next request on that
    connection, which then fails "Server disconnected" without an answer."""
    backlog: int = Field(2048, ge=1, le=65535)
    """Listen backlog of each replica's socket (connections the kernel queues before accept)."""

    @field_validator("host")
    @classmethod
    def _host_is_an_address(cls, value: str) -> str:
        return listen_host(value, "front_door.host")

    def in_flight_limit(self, max_ongoing_requests: int, max_queued_at_proxy: int) -> int:
        """Requests one replica serves through the door at once."""
        if self.max_in_flight_requests is not None:
            return self.max_in_flight_requests
        return max_ongoing_requests + max_queued_at_proxy


def listen_host(value: str, field: str) -> str:
    """`value` if it is an IP address literal or "node", else a ValueError naming `field`."""
    if value == NODE_ADDRESS:
        return value
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise ValueError(
            f"{field} must be an IP address literal or {NODE_ADDRESS!r} (this node's "
            f"address), got {value!r}"
        ) from None
    return value


def is_loopback(host: str) -> bool:
    """Whether a listener bound to `host` is reachable from this machine only ("node" and the
    wildcards are not)."""
    if host == NODE_ADDRESS or not host:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def url_host(host: str) -> str:
    """`host` as it goes in a URL: IPv6 literals in brackets, the wildcard as loopback."""
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def base_url(config: FrontDoorConfig, node_address: str = "127.0.0.1") -> str:
    """The OpenAI base URL of the door (`node_address` stands in for "node")."""
    host = node_address if config.host == NODE_ADDRESS else config.host
    return f"http://{url_host(host)}:{config.port}/v1"
