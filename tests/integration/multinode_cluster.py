"""A real two-node Ray cluster on this machine for the multi-node test: its own temp dir,
GCS/dashboard/agent/worker ports, Serve HTTP/gRPC ports and token auth, and the simulated mesh's
config pinned across the two nodes. Other Ray clusters on the machine are left alone: nothing runs
`ray stop`; `stop` kills only process trees whose command line names this cluster's temp dir.
"""

from __future__ import annotations

import contextlib
import copy
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from ray._private import ray_constants

from slomesh.launch import mesh

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]
DEPLOY_TIMEOUT_S = 300.0
CONTROL = {
    "ingress": "IngressDeployment",
    "scheduler": "SchedulerDeployment",
    "predictor": "PredictorDeployment",
    "profiler": "ProfilerDeployment",
    "deployer": "DeployerDeployment",
}


_HANDED_OUT: set[int] = set()
"""Ports `_free_port` already gave (not bound until Ray starts: the kernel may offer one again)."""


def _free_port() -> int:
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port
    raise RuntimeError("no free port")


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


_TAKEN_RANGES: list[tuple[int, int]] = []
"""Worker port ranges already handed to a node of this module (not bound until Ray starts)."""


def _ephemeral_low() -> int:
    """The lowest port the kernel hands out for bind(0) (`_free_port`), 32768 by default."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _port_range(width: int) -> tuple[int, int]:
    """A range of `width` free ports (for one node's workers), below the kernel's ephemeral
    range, so no port `_free_port` picks for another component can fall inside it (Ray refuses
    to start when two components share a port), and apart from the ranges already handed out."""
    top = max(_ephemeral_low() - width, 10000 + width)
    for _ in range(200):
        base = secrets.randbelow(top - 10000) + 10000
        hi = base + width - 1
        if any(base <= t_hi and t_lo <= hi for t_lo, t_hi in _TAKEN_RANGES):
            continue
        if all(_port_free(p) for p in range(base, base + width)):
            _TAKEN_RANGES.append((base, hi))
            return base, hi
    raise RuntimeError("no free worker port range")


def _processes() -> list[tuple[int, int, str]]:
    """(pid, ppid, full command line) of every process, from /proc (`ps` cuts long lines)."""
    procs = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                args = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        procs.append((int(entry.name), ppid, args))
    return procs


def _tree(roots: set[int]) -> set[int]:
    """`roots` and all their descendants (Ray workers are the raylet's children; their command
    lines are rewritten to `ray::...`, so they are found by parentage, not by the temp dir)."""
    procs = _processes()
    found = set(roots)
    grew = True
    while grew:
        grew = False
        for pid, ppid, _ in procs:
            if ppid in found and pid not in found:
                found.add(pid)
                grew = True
    found.discard(os.getpid())
    return found


def _kill(pids: set[int], sig: int = signal.SIGKILL) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _raylets(marker: str) -> set[int]:
    return {
        pid
        for pid, _, args in _processes()
        if "/raylet/raylet" in args.split(" ", 1)[0] and marker in args
    }


def _ours(temp_dir: str) -> set[int]:
    return _tree({pid for pid, _, args in _processes() if temp_dir in args})


@dataclass
class Cluster:
    temp_dir: str
    env: dict[str, str]
    gcs_port: int
    dashboard_port: int
    http_port: int
    grpc_port: int
    config: dict[str, Any] = field(default_factory=dict)
    config_file: Path | None = None
    node2_raylet: int | None = None
    log: list[str] = field(default_factory=list)

    @property
    def dashboard(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def run(self, *cmd: str, timeout: float = 120.0) -> str:
        proc = subprocess.run(
            [str(BIN / cmd[0]), *cmd[1:]],
            env=self.env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        self.log.append(f"$ {' '.join(cmd)}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{self.log[-1]}")
        return proc.stdout


def _node_ports() -> list[str]:
    lo, hi = _port_range(64)
    return [
        f"--node-manager-port={_free_port()}",
        f"--object-manager-port={_free_port()}",
        f"--min-worker-port={lo}",
        f"--max-worker-port={hi}",
        f"--dashboard-agent-listen-port={_free_port()}",
        f"--dashboard-agent-grpc-port={_free_port()}",
        f"--runtime-env-agent-port={_free_port()}",
        f"--metrics-export-port={_free_port()}",
    ]


def multinode_config(http_port: int, grpc_port: int) -> dict[str, Any]:
    """deploy/ray/local-simulated.yaml with its own ports, replica-0 and every control
    application pinned to the head (custom resource `head`), replica-1 to node 2 (`node2`)."""
    config = copy.deepcopy(mesh.load_config(mesh.CONFIGS["simulated"]))
    config["http_options"] = {"host": "127.0.0.1", "port": http_port}
    config = mesh.with_serve_grpc_proxy(config, grpc_port)  # the sampler asks replicas there
    config["logging_config"] = {"log_level": "WARNING", "enable_access_log": False}
    for app in config["applications"]:
        name = app["name"]
        if name.startswith("replica-"):
            app["args"]["step_time_scale"] = 0.05
            node = "head" if name == "replica-0" else "node2"
            actor = {"num_cpus": 0.5, "resources": {node: 1}}
            app["deployments"] = [{"name": "ReplicaDeployment", "ray_actor_options": actor}]
        else:
            actor = {"num_cpus": 0.1, "resources": {"head": 1}}
            app["deployments"] = [{"name": CONTROL[name], "ray_actor_options": actor}]
        if name == "scheduler":
            # round-robin spreads a light load over both replicas (qlm would keep it on one),
            # so requests are in flight on node 2 when it dies
            app["args"]["policy"] = "round-robin"
        if name == "ingress":  # the ingress's own door: a port of this cluster's, never one a
            # mesh beside it holds (SO_REUSEPORT would let these replicas join that mesh's door)
            app["args"]["front_door"] = {"port": _free_port()}
            app["args"]["grpc_door"] = {"port": _free_port()}
    return config


def app_statuses(cluster: Cluster) -> dict[str, str]:
    out = cluster.run("serve", "status", "--address", cluster.dashboard, timeout=60)
    data = yaml.safe_load(out) or {}
    apps = data.get("applications") or {}
    return {name: str(app.get("status")) for name, app in apps.items()}


def _wait_running(cluster: Cluster) -> dict[str, str]:
    want = {a["name"] for a in cluster.config["applications"]}
    deadline = time.monotonic() + DEPLOY_TIMEOUT_S
    statuses: dict[str, str] = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            statuses = app_statuses(cluster)
            if want <= set(statuses) and all(statuses[n] == "RUNNING" for n in want):
                return statuses
        time.sleep(2)
    detail = ""
    with contextlib.suppress(Exception):
        detail = cluster.run("serve", "status", "--address", cluster.dashboard, timeout=60)
    raise AssertionError(f"applications not RUNNING in {DEPLOY_TIMEOUT_S:.0f} s: {detail}")


def _wait_routes(cluster: Cluster, timeout_s: float = 60.0) -> None:
    want = {a["route_prefix"] for a in cluster.config["applications"]}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError, ValueError):
            routes = httpx.get(f"{cluster.http}/-/routes", timeout=5).json()
            if isinstance(routes, dict) and want <= set(routes):
                return
        time.sleep(0.5)
    raise AssertionError(f"Serve's proxy did not publish routes {sorted(want)}")


def new_cluster(temp_dir: str) -> Cluster:
    """A cluster record with fresh ports and credentials (8200/9200 for Serve when free)."""
    http_port = 8200 if _port_free(8200) else _free_port()
    grpc_port = 9200 if _port_free(9200) else _free_port()
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(32),
        "SLOMESH_MESH_TOKEN": secrets.token_hex(32),
        "SERVE_SOCKET_REUSE_PORT_ENABLED": "0",
        "RAY_USAGE_STATS_ENABLED": "0",
        # a real multi-node cluster: the session's embedded mesh turned Ray's single-machine
        # mode on in this process's environment (mesh.loopback_node)
        ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR: "1",
    }
    env.pop("RAY_ADDRESS", None)
    return Cluster(temp_dir, env, _free_port(), _free_port(), http_port, grpc_port)


def start(c: Cluster) -> None:
    """Start the head and node 2, deploy the pinned mesh, and wait until Serve routes it."""
    store = str(200 * 1024 * 1024)
    c.run(
        "ray", "start", "--head", "--node-ip-address=127.0.0.1",
        f"--temp-dir={c.temp_dir}", f"--port={c.gcs_port}",
        "--include-dashboard=true", "--dashboard-host=127.0.0.1",
        f"--dashboard-port={c.dashboard_port}",
        f"--ray-client-server-port={_free_port()}",
        "--num-cpus=3", '--resources={"head": 100}',
        f"--object-store-memory={store}", "--disable-usage-stats",
        *_node_ports(),
    )  # fmt: skip
    before = _raylets(c.temp_dir)
    c.run(
        "ray", "start", f"--address=127.0.0.1:{c.gcs_port}", "--node-ip-address=127.0.0.1",
        f"--temp-dir={c.temp_dir}", "--num-cpus=2", '--resources={"node2": 100}',
        f"--object-store-memory={store}", "--disable-usage-stats",
        *_node_ports(),
    )  # fmt: skip
    node2 = _raylets(c.temp_dir) - before
    assert len(node2) == 1, f"node 2's raylet not found: {node2}"
    c.node2_raylet = node2.pop()
    c.config = multinode_config(c.http_port, c.grpc_port)
    c.config_file = Path(c.temp_dir) / "serve-multinode.yaml"
    c.config_file.write_text(yaml.safe_dump(c.config, sort_keys=False))
    t0 = time.monotonic()
    c.run("serve", "deploy", str(c.config_file), "--address", c.dashboard)
    statuses = _wait_running(c)
    _wait_routes(c)
    print(f"\n[multinode] deployed in {time.monotonic() - t0:.1f} s: {statuses}")


def kill_node2(c: Cluster) -> set[int]:
    """SIGKILL node 2's raylet and everything under it; the pids killed."""
    assert c.node2_raylet is not None
    pids = _tree({c.node2_raylet})
    _kill(pids)
    return pids


def stop(temp_dir: str) -> None:
    """SIGTERM every process of this cluster, SIGKILL what is left after 10 s, remove the dir."""
    pids = _ours(temp_dir)
    _kill(pids, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _ours(temp_dir):
        time.sleep(0.5)
    _kill(_ours(temp_dir) | pids)
    shutil.rmtree(temp_dir, ignore_errors=True)
