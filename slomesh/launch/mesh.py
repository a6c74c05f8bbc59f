"""Starting the mesh from a Serve config on an embedded local Ray (`slomesh up`).

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
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import yaml

from shared.rpc.mesh_auth import MESH_TOKEN_ENV, new_mesh_token
from slomesh.launch import listeners, readiness
from slomesh.launch.front_door import door_url, grpc_door_target, wait_for_door
from slomesh.launch.scheduler_poll import ready_replicas_poll

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


MESH_IDLE_ENV = {
    "RAY_SERVE_CONTROL_LOOP_INTERVAL_S": "0.5",
    "RAY_SERVE_METRICS_EXPORT_INTERVAL_MS": "1000",
}
"""Timers of Ray Serve's processes, slowed from Serve's defaults so that the mesh costs less CPU
per second whether requests come or not (each may be overridden from the environment;
docs/results/hot-path.md measures the idle mesh). The controller's control loop runs every
0.5 s instead of 0.1 s: each turn costs it and the GCS CPU whether anything changed or not, and
what it drives (a replica replaced after it died, a deploy's next step, an autoscaling
decision, handles told of new replicas) happens at most 0.4 s later; slomesh's own failover
does not wait on it (the ingress moves a request off a shard or replica that fails a call at
once). Every replica and handle exports Serve's cached metrics once a second instead of ten
times; Prometheus scrapes every few seconds."""


def apply_process_env(environ: MutableMapping[str, str]) -> None:
    """Set the mesh's Ray and Serve settings in `environ`, each unless already set there."""
    for key, value in (SERVE_HOT_PATH_ENV | MESH_PROCESS_ENV | MESH_IDLE_ENV).items():
        environ.setdefault(key, value)


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
tiny CPU model on a 2-core machine), and with any config of a vLLM replica they describe
(`shipped_profiles`); `slomesh up --profile` replaces them."""


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
    out = copy.deepcopy(config)
    for app in out["applications"]:
        args = app.get("args") or {}
        app["args"] = args
        module = str(app.get("import_path", "")).partition(":")[0]
        if module in _PROFILE_READERS:
            args["profile_files"] = list(dict.fromkeys([*args.get("profile_files", []), *files]))
        elif (key := _vllm_replica(app)) is not None:
            vllm = dict(args.get("vllm") or {})  # YAML anchors share one dict between replicas
            prof = profiles.get(key)
            if prof is not None:
                d = prof.decode
                vllm["decode_coeffs"] = [d.d1, d.d2, d.d3, d.d4]
            args["vllm"] = vllm
    return out


def _vllm_replica(app: dict[str, Any]) -> tuple[str, str, int] | None:
    """(gpu, served model, tensor-parallel degree) of a vLLM replica application, what its
    profile is looked up by; None for any other application."""
    from services.replica.args import ReplicaArgs

    args = app.get("args") or {}
    module = str(app.get("import_path", "")).partition(":")[0]
    if module != "services.replica.deployment" or args.get("engine") != "vllm":
        return None
    defaults = ReplicaArgs()
    vllm = args.get("vllm") or {}
    model = vllm.get("served_model_name") or args.get("model", defaults.model)
    tp = vllm.get("tensor_parallel_size") or args.get("tensor_parallel", 1)
    return (args.get("gpu", defaults.gpu), model, tp)


def shipped_profiles(config: dict[str, Any]) -> list[Path]:
    """The shipped profile files (DEFAULT_PROFILES) that describe one of `config`'s vLLM
    replicas: what `slomesh up --config` publishes when no --profile is given."""
    from shared.profiles.io import load_profiles

    keys = {k for app in config["applications"] if (k := _vllm_replica(app)) is not None}
    return [
        path
        for path in DEFAULT_PROFILES.values()
        if any((p.gpu, p.model, p.tensor_parallel) in keys for p in load_profiles(path))
    ]


PortTaken = listeners.PortTaken
check_transport = listeners.check_transport
with_serve_grpc_proxy = listeners.with_serve_grpc_proxy

START_PORT_WAIT_S = 5.0
"""How long a start waits for a port held by a mesh that is still stopping before refusing."""


def check_ports_free(
    config: dict[str, Any],
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    wait_s: float = 0.0,
) -> None:
    """Refuse to start when a port the mesh listens on is taken, naming its field
    (listeners.py); the mesh's listeners bind with SO_REUSEPORT, so a second mesh would
    otherwise share them silently."""
    found = listeners.listeners(config, metrics_host, metrics_port)
    listeners.check_ports_free(found, wait_s)


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
    config: dict[str, Any],
    num_cpus: int | None = None,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    ready_timeout_s: float | None = readiness.READY_TIMEOUT_S,
) -> float:
    """Start Ray, Serve and every application and wait until the mesh is ready: every replica
    ready at the scheduler, then one completion served per model a replica starts on
    (readiness.py; raises MeshNotReady naming what is short after `ready_timeout_s`; None: no
    wait); returns the seconds it took. Ray's Prometheus exporter
    listens on `metrics_host:metrics_port` (None: a port Ray picks; deploy/grafana/README.md);
    "127.0.0.1" makes the embedded Ray node a loopback one."""
    import ray
    from ray import serve
    from ray.serve.api import RunTarget

    t0 = time.monotonic()
    check_transport(config)
    check_ports_free(config, metrics_port, metrics_host, wait_s=START_PORT_WAIT_S)
    ensure_mesh_token()
    # Serve's proxies bind with SO_REUSEADDR only together with SO_REUSEPORT (Serve's own
    # default): without it a proxy restarted at once cannot bind while the connections its
    # predecessor closed sit in TIME_WAIT ("Failed to bind to address 127.0.0.1:8000"). A second
    # mesh sharing the port is refused by check_ports_free instead.
    os.environ["SERVE_SOCKET_REUSE_PORT_ENABLED"] = "1"
    apply_process_env(os.environ)  # inherited by Ray's processes
    # logical CPUs for Serve's placement: control services take 0.1 each, replicas 1; the OS
    # shares the real cores among them
    cpus = num_cpus if num_cpus is not None else max(8, os.cpu_count() or 1)
    ray.init(
        num_cpus=cpus,
        include_dashboard=False,
        log_to_driver=False,
        _metrics_export_port=metrics_port,
        **loopback_node(metrics_host),
    )
    serve.start(
        proxy_location=config.get("proxy_location", "HeadOnly"),
        http_options=config.get("http_options", {}),
        grpc_options=config.get("grpc_options", {}),
        logging_config=config.get("logging_config", _QUIET),
    )
    apps = config["applications"]
    try:
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
    except RuntimeError as err:  # Serve names the deployment; its status says why
        raise RuntimeError(f"{err}\n{_unhealthy_deployments()}") from None
    if listeners.serve_http_proxy_enabled(config):
        _wait_for_routes(config, [a.get("route_prefix") for a in apps])
    wait_for_door(config)
    if ready_timeout_s is not None:
        with ready_replicas_poll(readiness.scheduler_apps(config)) as ready:
            readiness.wait_until_ready(config, openai_url(config), ready, ready_timeout_s)
    return time.monotonic() - t0


def _unhealthy_deployments() -> str:
    """Each deployment Serve does not report healthy, with the message it gives (a constructor's
    exception, a port it could not bind)."""
    from ray import serve

    lines = []
    for app_name, app in serve.status().applications.items():
        for name, dep in app.deployments.items():
            if dep.status != "HEALTHY":
                lines.append(f"{app_name}/{name}: {dep.status}: {dep.message}")
    return "\n".join(lines) or "(no deployment reports a failure)"


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


STOP_PORT_WAIT_S = 15.0
"""How long `stop` waits for the mesh's processes to let go of its ports."""


def stop(config: dict[str, Any] | None = None) -> None:
    """Stop Serve and Ray; with `config`, return once none of its ports answers any more (Ray
    ends the replica processes a moment after `ray.shutdown`), so a start right after it finds
    them free."""
    import ray
    from ray import serve

    serve.shutdown()  # type: ignore[no-untyped-call]
    ray.shutdown()
    if config is not None:
        listeners.wait_until_closed(listeners.listeners(config), STOP_PORT_WAIT_S)


def endpoints(config: dict[str, Any]) -> tuple[str, str]:
    """(Serve's HTTP proxy's OpenAI base URL, the gRPC address of the `Ingress` service: the
    ingress's own gRPC door, else Serve's gRPC proxy)."""
    http = config.get("http_options", {})
    grpc = config.get("grpc_options", {})
    host = http.get("host", "127.0.0.1")
    return (
        f"http://{host}:{http.get('port', 8000)}/v1",
        grpc_door_target(config) or f"{host}:{grpc.get('port', 9000)}",
    )


def loopback_node(metrics_host: str) -> dict[str, Any]:
    """`ray.init` arguments that make the embedded node a loopback one when `metrics_host` is
    loopback. Ray's metrics exporter binds every interface unless its node's address is a
    loopback one, and `ray.init` turns a loopback `_node_ip_address` into the machine's routable
    address unless Ray's single-machine mode (what it does on macOS and Windows) is on: set it
    for this process and the Ray processes it starts."""
    if metrics_host != "127.0.0.1":
        return {}
    from ray._private import ray_constants

    os.environ[ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    return {"_node_ip_address": "127.0.0.1"}


def openai_url(config: dict[str, Any]) -> str:
    """The OpenAI base URL clients should use: the ingress replicas' own door when enabled
    (no proxy hop), else Serve's HTTP proxy."""
    return door_url(config) or endpoints(config)[0]


def wait_for_interrupt() -> None:
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
