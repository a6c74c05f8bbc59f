"""Starting the mesh from a Serve config on an embedded local Ray (`slomesh up`), and `status`.

The config is the same file `serve deploy` takes; each application's `import_path` names an
application builder that receives the entry's `args`. All applications deploy together and
`start` returns once every one of them is running.
"""

from __future__ import annotations

import copy
import importlib
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from shared.rpc.mesh_auth import MESH_TOKEN_ENV, credential_metadata, new_mesh_token
from slomesh.cli.front_door import door_port_taken, door_url, wait_for_door
from slomesh.cli.ports import port_taken

# Serve's per-request access log costs CPU on the request path of a 2-core machine
_QUIET = {"log_level": "WARNING", "enable_access_log": False}

SERVE_HOT_PATH_ENV = {
    "RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0",
    "RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP": "0",
    "RAY_SERVE_USE_GRPC_BY_DEFAULT": "1",
}
"""Ray Serve settings of every process of the mesh (each may be overridden from the
environment): a deployment's code runs on its replica's own event loop, and a handle's router
on its caller's loop, instead of one extra thread each with a cross-thread hand-off per request
and per streamed message; handle calls between deployments (and the HTTP proxy's to the
ingress) go over gRPC to the replica instead of as Ray actor tasks. Three of the knobs Serve's
RAY_SERVE_THROUGHPUT_OPTIMIZED sets; the gRPC handles cut the CPU per request outside the
engine (docs/results/design.md). Its RAY_SERVE_LOG_TO_STDERR=0 is left out (access logs are
already off, `_QUIET`); RAY_SERVE_FREEZE_GC_ON_STARTUP is on by default."""

MESH_PROCESS_ENV = {
    "RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH": "services.ingress.proxy_errors:proxy_middlewares",
    "RAY_worker_niceness": "0",
    "OPENBLAS_NUM_THREADS": "1",
}
"""Settings of the mesh's Ray processes (each may be overridden from the environment).
The HTTP proxy runs services/ingress/proxy_errors.py, so its own 429/503/500 answers come in
OpenAI's error JSON like the ingress's. Ray starts its workers (every Serve replica and proxy)
15 nice levels below their parent, so any other process on the host, a load generator
included, takes the CPU from the serving path under load: the mesh runs at its parent's
niceness instead (`nice -n 10 slomesh up` still lowers it). NumPy's OpenBLAS runs one thread:
it reads its thread count when NumPy is imported, before Ray sets OMP_NUM_THREADS for an actor,
so the predictor's and ingress's small matrix products would wake a second BLAS thread that
spins against the engines; vLLM's own threads are OpenMP, not OpenBLAS."""


def _deploy_dir() -> Path:
    """deploy/ray of the checkout this package runs from (an editable install), so the
    installed command finds its configs from any directory; else ./deploy/ray."""
    here = Path(__file__).resolve().parents[2] / "deploy" / "ray"
    return here if here.is_dir() else Path("deploy/ray")


DEPLOY_DIR = _deploy_dir()

CONFIGS = {
    "vllm": DEPLOY_DIR / "local.yaml",
    "simulated": DEPLOY_DIR / "local-simulated.yaml",
}

DEFAULT_PROFILES = {"vllm": DEPLOY_DIR / "profiles" / "cpu-tiny-llama.json"}
"""Measured profiles published with the default configs (`slomesh profile --engine vllm` of the
tiny CPU model on a 2-core machine); `slomesh up --profile` replaces them."""


def load_config(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise ValueError(f"--config: {path} does not exist")
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or not data.get("applications"):
        raise ValueError(f"--config: {path} has no `applications`")
    return data


_PROFILE_READERS = ("services.scheduler.deployment", "services.profiler.deployment")


def with_profiles(config: dict[str, Any], paths: list[Path]) -> dict[str, Any]:
    """`config` with measured profiles published (`slomesh profile` files): the scheduler and
    profiler applications load `paths` (made absolute: Serve actors may run elsewhere) ahead of
    the roofline defaults, and every vLLM replica whose (gpu, served model, tensor_parallel) has
    a profile gets its decode coefficients (turning on SCORPIO's VBS admission there)."""
    from services.replica.deployment import ReplicaArgs
    from shared.profiles.io import load_profiles

    files = []
    profiles: dict[tuple[str, str, int], Any] = {}
    for path in paths:
        full = path.expanduser().resolve()
        if not full.is_file():
            raise ValueError(f"{path} does not exist")
        files.append(str(full))
        for p in load_profiles(full):
            profiles[(p.gpu, p.model, p.tensor_parallel)] = p
    defaults = ReplicaArgs()
    out = copy.deepcopy(config)
    for app in out["applications"]:
        args = app.get("args") or {}
        app["args"] = args
        module = str(app.get("import_path", "")).partition(":")[0]
        if module in _PROFILE_READERS:
            args["profile_files"] = list(dict.fromkeys([*args.get("profile_files", []), *files]))
        elif module == "services.replica.deployment" and args.get("engine") == "vllm":
            vllm = dict(args.get("vllm") or {})  # YAML anchors share one dict between replicas
            model = vllm.get("served_model_name") or args.get("model", defaults.model)
            tp = vllm.get("tensor_parallel_size") or args.get("tensor_parallel", 1)
            prof = profiles.get((args.get("gpu", defaults.gpu), model, tp))
            if prof is not None:
                d = prof.decode
                vllm["decode_coeffs"] = [d.d1, d.d2, d.d3, d.d4]
            args["vllm"] = vllm
    return out


class PortTaken(RuntimeError):
    """A port the mesh must own is already bound by another process."""


def check_ports_free(config: dict[str, Any]) -> None:
    """Refuse to start when the HTTP or gRPC port is taken, naming it. Serve's proxies bind
    with SO_REUSEPORT, so a second mesh would otherwise share them silently and the kernel
    would spread requests over both; this bind (without SO_REUSEPORT) fails when any other
    socket holds the port."""
    http = config.get("http_options", {})
    grpc = config.get("grpc_options", {})
    checks = [
        ("http_options.port", http.get("host", "127.0.0.1"), int(http.get("port", 8000))),
        ("grpc_options.port", "::", int(grpc.get("port", 9000))),
    ]
    taken = door_port_taken(config)
    if taken is not None:
        raise PortTaken(taken)
    for field, host, port in checks:
        why = port_taken(host, port)
        if why is not None:
            raise PortTaken(
                f"{field}: port {port} on {host} is taken ({why}); stop the other "
                "mesh or Serve instance, or pick another port in the config"
            )


def mesh_token_file() -> Path:
    """Where `slomesh up` leaves the mesh credential for local operator commands (mode 0600)."""
    return Path.home() / ".cache" / "slomesh" / "mesh-token"


def ensure_mesh_token() -> str:
    """The mesh credential for this start: SLOMESH_MESH_TOKEN if set, else a fresh one. It is
    put in the environment the Ray processes inherit and in mesh_token_file() for `status`."""
    token = os.environ.get(MESH_TOKEN_ENV) or new_mesh_token()
    os.environ[MESH_TOKEN_ENV] = token
    path = mesh_token_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token)
    return token


def load_mesh_token() -> None:
    """For operator commands (`slomesh status`): take the credential `slomesh up` left."""
    if os.environ.get(MESH_TOKEN_ENV):
        return
    path = mesh_token_file()
    if path.exists():
        os.environ[MESH_TOKEN_ENV] = path.read_text().strip()


def _builder(import_path: str) -> Any:
    module, _, attr = import_path.partition(":")
    return getattr(importlib.import_module(module), attr)


def start(
    config: dict[str, Any], num_cpus: int | None = None, metrics_port: int | None = None
) -> float:
    """Start Ray, Serve and every application; returns the seconds it took. Ray's Prometheus
    exporter listens on `metrics_port` (None: a port Ray picks; deploy/grafana/README.md)."""
    import ray
    from ray import serve
    from ray.serve.api import RunTarget

    t0 = time.monotonic()
    check_ports_free(config)
    ensure_mesh_token()
    os.environ["SERVE_SOCKET_REUSE_PORT_ENABLED"] = "0"  # our proxies never share a port
    for key, value in (SERVE_HOT_PATH_ENV | MESH_PROCESS_ENV).items():
        os.environ.setdefault(key, value)  # inherited by Ray's processes
    # logical CPUs for Serve's placement: control services take 0.1 each, replicas 1; the OS
    # shares the real cores among them
    cpus = num_cpus if num_cpus is not None else max(8, os.cpu_count() or 1)
    ray.init(
        num_cpus=cpus,
        include_dashboard=False,
        log_to_driver=False,
        _metrics_export_port=metrics_port,
    )
    serve.start(
        proxy_location=config.get("proxy_location", "HeadOnly"),
        http_options=config.get("http_options", {}),
        grpc_options=config.get("grpc_options", {}),
        logging_config=config.get("logging_config", _QUIET),
    )
    apps = config["applications"]
    serve.run_many(  # one deploy for all applications: they start in parallel
        [
            RunTarget(
                target=_builder(app["import_path"])(app.get("args") or {}),
                name=app["name"],
                route_prefix=app.get("route_prefix"),
                logging_config=config.get("logging_config", _QUIET),
            )
            for app in apps
        ]
    )
    _wait_for_routes(config, [a.get("route_prefix") for a in apps])
    wait_for_door(config)
    return time.monotonic() - t0


def _wait_for_routes(
    config: dict[str, Any], prefixes: list[str | None], timeout_s: float = 60.0
) -> None:
    """Serve's proxy learns routes a moment after deploys finish: wait until it knows them all."""
    import httpx

    http, _ = endpoints(config)
    url = http.removesuffix("/v1") + "/-/routes"
    want = {p for p in prefixes if p}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            routes = httpx.get(url, timeout=5).json()
            if isinstance(routes, dict) and want <= set(routes):
                return
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.5)
    raise RuntimeError(f"Serve's proxy did not publish routes {sorted(want)} in {timeout_s:.0f} s")


def stop() -> None:
    import ray
    from ray import serve

    serve.shutdown()  # type: ignore[no-untyped-call]
    ray.shutdown()


def endpoints(config: dict[str, Any]) -> tuple[str, str]:
    http = config.get("http_options", {})
    grpc = config.get("grpc_options", {})
    return (
        f"http://{http.get('host', '127.0.0.1')}:{http.get('port', 8000)}/v1",
        f"{http.get('host', '127.0.0.1')}:{grpc.get('port', 9000)}",
    )


def openai_url(config: dict[str, Any]) -> str:
    """The OpenAI base URL clients should use: the ingress replicas' own door when enabled
    (no proxy hop), else Serve's HTTP proxy."""
    return door_url(config) or endpoints(config)[0]


def wait_for_interrupt() -> None:
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    done.wait()


def replica_status(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Each replica's engine state, asked over gRPC through the proxy."""
    import grpc

    from shared.rpc.slomesh.v1 import replica_pb2, replica_pb2_grpc

    _, target = endpoints(config)
    load_mesh_token()
    out = []
    with grpc.insecure_channel(target) as channel:
        stub = replica_pb2_grpc.ReplicaStub(channel)  # type: ignore[no-untyped-call]
        for app in config["applications"]:
            name = app["name"]
            if not name.startswith("replica-"):
                continue
            try:
                st = stub.Status(
                    replica_pb2.StatusQuery(),
                    metadata=[("application", name), *credential_metadata()],
                    timeout=5,
                )
                out.append(
                    {
                        "application": name,
                        "engine": st.engine,
                        "model": st.active_model,
                        "waiting": st.waiting,
                        "running": st.running,
                        "kv_blocks": f"{st.kv_used_blocks}/{st.kv_total_blocks}",
                    }
                )
            except grpc.RpcError as err:
                out.append({"application": name, "error": err.code().name})
    return out
