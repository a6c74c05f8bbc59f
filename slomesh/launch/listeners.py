"""Every listener a mesh config opens on this machine, where, and who may call it; the checks
`slomesh up` runs on them before a start.

- **Ports.** Each one must be free (`ports.port_taken`): the mesh's listeners bind with
  SO_REUSEPORT, so a second mesh would otherwise share them silently. A port held by a mesh that
  is still stopping (its processes exit a moment after `ray.shutdown`) is waited for, a few
  seconds, before the start is refused.
- **Exposure.** A listener that reaches the ingress's API (Serve's HTTP and gRPC proxies, the
  ingress's front door and gRPC door) bound beyond loopback needs the ingress to require API
  keys (`api_keys.required: true`), unless the ingress's `allow_unauthenticated_public_listeners`
  says the operator accepts that anyone who reaches the port may generate. Serve's gRPC proxy
  binds every interface whatever the config says, so turning it on counts as beyond loopback.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from services.ingress.args import IngressArgs
from services.ingress.core.front_door import is_loopback
from slomesh.launch.ports import port_taken

INGRESS_IMPORT_PATH = "services.ingress.deployment:build_app"
ALLOW_FIELD = "allow_unauthenticated_public_listeners"


class PortTaken(RuntimeError):
    """A port the mesh must own is already bound by another process."""


class PublicWithoutKeys(RuntimeError):
    """A listener beyond loopback would serve generation without API keys."""


@dataclass(frozen=True)
class Listener:
    """One listening socket of the mesh."""

    what: str
    """What serves there."""
    field: str
    """The config field (or flag) that sets its port."""
    host: str
    """Bind address ("node": each node's own address; "::" / "0.0.0.0": every interface)."""
    port: int
    """TCP port."""
    callers: str
    """Who may call it."""
    api: bool
    """Whether it reaches the ingress's client API (API keys apply)."""


def _raw_ingress_args(config: dict[str, Any]) -> dict[str, Any] | None:
    for app in config.get("applications", []):
        if app.get("import_path") == INGRESS_IMPORT_PATH:
            return dict(app.get("args") or {})
    return None


def ingress_args(config: dict[str, Any]) -> IngressArgs | None:
    """The ingress application's validated args (None: the config has no ingress). Its own
    exposure rule is left to `check_exposure`, which names every listener at once."""
    raw = _raw_ingress_args(config)
    if raw is None:
        return None
    return IngressArgs.model_validate({**raw, ALLOW_FIELD: True})


def serve_grpc_proxy_enabled(config: dict[str, Any]) -> bool:
    """Serve starts its gRPC proxy only for a config that lists servicer functions."""
    return bool((config.get("grpc_options") or {}).get("grpc_servicer_functions"))


def serve_http_proxy_enabled(config: dict[str, Any]) -> bool:
    """Serve runs its HTTP proxy unless `proxy_location` is "Disabled"."""
    return str(config.get("proxy_location", "HeadOnly")) != "Disabled"


def _keys(args: IngressArgs | None) -> str:
    if args is not None and args.api_keys.required:
        return "clients with an API key (api_keys.required)"
    return "anyone who reaches the address (no API key required)"


def listeners(
    config: dict[str, Any], metrics_host: str | None = None, metrics_port: int | None = None
) -> list[Listener]:
    """The mesh's listeners on this machine (metrics: Ray's Prometheus export, when a port is
    given)."""
    args = ingress_args(config)
    api_callers = _keys(args)
    out: list[Listener] = []
    if serve_http_proxy_enabled(config):
        http = config.get("http_options") or {}
        out.append(
            Listener(
                "Serve's HTTP proxy (OpenAI API, through a proxy hop)",
                "http_options.port",
                str(http.get("host", "127.0.0.1")),
                int(http.get("port", 8000)),
                api_callers,
                True,
            )
        )
        if serve_grpc_proxy_enabled(config):
            grpc = config.get("grpc_options") or {}
            out.append(
                Listener(
                    "Serve's gRPC proxy (Ingress; internal services with the mesh credential)",
                    "grpc_options.port",
                    "::",
                    int(grpc.get("port", 9000)),
                    api_callers,
                    True,
                )
            )
    if args is not None and args.front_door.enabled:
        door = args.front_door
        out.append(
            Listener(
                "ingress front door (OpenAI API)",
                "ingress front_door.port",
                door.host,
                door.port,
                api_callers,
                True,
            )
        )
    if args is not None and args.grpc_door.enabled:
        gdoor = args.grpc_door
        out.append(
            Listener(
                "ingress gRPC door (Ingress.Generate)",
                "ingress grpc_door.port",
                gdoor.host,
                gdoor.port,
                api_callers,
                True,
            )
        )
    if metrics_port is not None:
        out.append(
            Listener(
                "Prometheus metrics (Ray's export)",
                "--metrics-port",
                metrics_host or "127.0.0.1",
                metrics_port,
                "anyone who reaches the address (read only, no authentication)",
                False,
            )
        )
    return out


def _probe_host(host: str) -> str:
    return "0.0.0.0" if host == "node" else host


def check_ports_free(found: list[Listener], wait_s: float = 0.0) -> None:
    """Refuse when a listener's port is taken, naming its field; a taken port is re-checked
    for up to `wait_s` first (a mesh that is still stopping)."""
    deadline = time.monotonic() + wait_s
    for listener in found:
        host = _probe_host(listener.host)
        why = port_taken(host, listener.port)
        while why is not None and time.monotonic() < deadline:
            time.sleep(0.25)
            why = port_taken(host, listener.port)
        if why is not None:
            raise PortTaken(
                f"{listener.field}: port {listener.port} on {host} is taken ({why}); stop the "
                "other mesh or program, or pick another port"
            )


def check_exposure(config: dict[str, Any], found: list[Listener]) -> None:
    """Refuse API listeners beyond loopback without required API keys (module docstring)."""
    args = ingress_args(config)
    raw = _raw_ingress_args(config) or {}
    if args is None or args.api_keys.required or raw.get(ALLOW_FIELD):
        return
    public = [f"{x.field} ({x.host})" for x in found if x.api and not is_loopback(x.host)]
    if public:
        raise PublicWithoutKeys(
            f"{', '.join(public)} listen beyond loopback and the ingress requires no API key, "
            "so anyone who reaches them can generate: configure api_keys with required: true, "
            "bind to 127.0.0.1, or accept the risk with --allow-unauthenticated-public-listeners "
            f"(the ingress's {ALLOW_FIELD}: true)"
        )


def allow_public_listeners(config: dict[str, Any]) -> dict[str, Any]:
    """`config` with the ingress's allow_unauthenticated_public_listeners set (the operator's
    explicit acceptance; the ingress checks its own doors with it too)."""
    import copy

    out = copy.deepcopy(config)
    for app in out.get("applications", []):
        if app.get("import_path") == INGRESS_IMPORT_PATH:
            app.setdefault("args", {})[ALLOW_FIELD] = True
    return out


def check_transport(config: dict[str, Any]) -> None:
    """The ingress's `transport: grpc` goes through Serve's gRPC proxy: refuse a config that
    does not turn it on."""
    args = ingress_args(config)
    if args is not None and args.transport == "grpc" and not serve_grpc_proxy_enabled(config):
        raise ValueError(
            "ingress transport: grpc calls the services through Serve's gRPC proxy, which this "
            "config leaves off: list grpc_options.grpc_servicer_functions (with_serve_grpc_proxy)"
        )


SERVE_GRPC_SERVICERS = tuple(
    f"shared.rpc.slomesh.v1.{name}_pb2_grpc.add_{cls}Servicer_to_server"
    for name, cls in (
        ("ingress", "Ingress"),
        ("predictor", "Predictor"),
        ("profiler", "Profiler"),
        ("scheduler", "Scheduler"),
        ("deployer", "Deployer"),
        ("replica", "Replica"),
    )
)
"""Every slomesh service, for a config that turns Serve's gRPC proxy on."""


def with_serve_grpc_proxy(config: dict[str, Any], port: int = 9000) -> dict[str, Any]:
    """`config` with Serve's gRPC proxy on `port` serving every slomesh service (it binds every
    interface: the exposure check then asks for API keys or the explicit allowance)."""
    import copy

    out = copy.deepcopy(config)
    out["grpc_options"] = {"port": port, "grpc_servicer_functions": list(SERVE_GRPC_SERVICERS)}
    return out


def wait_until_closed(found: list[Listener], timeout_s: float) -> None:
    """Return once no listener of `found` answers a connect, or after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    for listener in found:
        host = _probe_host(listener.host)
        while port_taken(host, listener.port) is not None and time.monotonic() < deadline:
            time.sleep(0.25)


def table(found: list[Listener]) -> str:
    """The listeners as printed by `slomesh up`."""
    rows = [f"  {x.host}:{x.port}  {x.what}: {x.callers}" for x in found]
    return "\n".join(["listeners:", *rows])
