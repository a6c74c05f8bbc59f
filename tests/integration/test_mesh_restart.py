"""Stop the mesh and start it again at once, while clients hold keep-alive connections.

`slomesh up` (simulated engines, its own ports so the session's live mesh is not in the way)
runs in a subprocess; each start serves a request through the front door, Serve's HTTP proxy
and the gRPC door, keeping the HTTP connections open; Ctrl-C stops it and the next start follows
at once. Before the fix the second start failed 2 times in 3 with Serve's proxy unable to bind
(`Failed to bind to address '127.0.0.1:<port>'`: the stopped proxy's closed connections sat in
TIME_WAIT and the proxy bound without SO_REUSEADDR), or with the door's port still held by
replicas that had not exited yet. A port that is really taken is still refused in one line.
"""

from __future__ import annotations

import copy
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import yaml

from shared.rpc.slomesh.v1 import ingress_pb2, ingress_pb2_grpc
from slomesh.launch import mesh

STARTS = 3
START_TIMEOUT_S = 240.0
READY_TIMEOUT_S = 200.0
"""`slomesh up --ready-timeout-s`: inside START_TIMEOUT_S, so a start that never gets ready
prints what it waited for (readiness.MeshNotReady) before the test gives up on it."""
MODEL = "llama-3.1-8b"
BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]
SLOMESH = [sys.executable, "-m", "slomesh.cli.main"]
"""This checkout's CLI (run from ROOT; an installed `slomesh` may be another checkout's)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(ports: dict[str, int]) -> dict[str, Any]:
    config = copy.deepcopy(mesh.load_config(mesh.CONFIGS["simulated"]))
    config["http_options"] = {"host": "127.0.0.1", "port": ports["http"]}
    for app in config["applications"]:
        args = app.setdefault("args", {})
        if app["name"].startswith("replica-"):
            args["step_time_scale"] = 0.02
        if app["name"] == "ingress":
            args["front_door"] = {"port": ports["door"]}
            args["grpc_door"] = {"port": ports["grpc"]}
            args["num_replicas"] = 1
    return config


def _pump(stream: Any, lines: queue.Queue[str]) -> None:
    for line in stream:
        lines.put(line.rstrip())


def _start(config_file: Path, metrics_port: int) -> tuple[subprocess.Popen[str], queue.Queue[str]]:
    """`slomesh up` in a subprocess; returns once it printed that it is up (or exited)."""
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    proc = subprocess.Popen(
        [*SLOMESH, "up", "--engine", "simulated", "--config", str(config_file),
         "--metrics-port", str(metrics_port), "--num-cpus", "8",
         "--ready-timeout-s", str(READY_TIMEOUT_S)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    assert proc.stdout is not None
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1.0)
        except queue.Empty:
            if proc.poll() is not None:
                break
            continue
        seen.append(line)
        if line.startswith("Ctrl-C to stop"):
            return proc, lines
    proc.kill()
    proc.wait()
    raise AssertionError("slomesh up did not come up:\n" + "\n".join(seen[-30:]))


def _stop(proc: subprocess.Popen[str], lines: queue.Queue[str]) -> str:
    proc.send_signal(signal.SIGINT)  # what Ctrl-C does
    proc.wait(timeout=120)
    time.sleep(0.5)  # the reader thread takes the last lines
    out = []
    while not lines.empty():
        out.append(lines.get())
    assert proc.returncode == 0, out
    return "\n".join(out)


def _serve_one_each(clients: list[httpx.Client], ports: dict[str, int]) -> list[str]:
    """A completion through each door (the clients keep their connections open) and a gRPC
    Generate; returns the finish reasons."""
    body = {"model": MODEL, "prompt": "restart", "max_tokens": 3}
    reasons = []
    for client, port in zip(clients, (ports["door"], ports["http"]), strict=True):
        r = client.post(f"http://127.0.0.1:{port}/v1/completions", json=body)
        assert r.status_code == 200, r.text
        reasons.append(r.json()["choices"][0]["finish_reason"])
    with grpc.insecure_channel(f"127.0.0.1:{ports['grpc']}") as channel:
        stub = ingress_pb2_grpc.IngressStub(channel)  # type: ignore[no-untyped-call]
        request = ingress_pb2.GenerateRequest(model=MODEL, prompt="restart", max_tokens=3)
        chunks = list(stub.Generate(request, timeout=30))
        reasons.append(chunks[-1].finish_reason)
    return reasons


def test_mesh_restarts_at_once_while_clients_hold_connections(tmp_path: Path) -> None:
    ports = {k: _free_port() for k in ("http", "door", "grpc", "metrics")}
    config_file = tmp_path / "restart.yaml"
    config_file.write_text(yaml.safe_dump(_config(ports), sort_keys=False))
    served = []
    for attempt in range(STARTS):
        proc, lines = _start(config_file, ports["metrics"])
        clients = [httpx.Client(timeout=30) for _ in range(2)]  # keep-alive to both doors
        try:
            served.append(_serve_one_each(clients, ports))
        finally:
            out = _stop(proc, lines)  # the clients still hold their connections
            for client in clients:
                client.close()
        assert "slomesh stopped" in out, out
        print(f"[restart] start {attempt + 1}: served {served[-1]}")
    assert served == [["length"] * 3] * STARTS


@pytest.mark.parametrize("which", ["door", "http"])
def test_a_port_really_taken_is_refused_in_one_line(tmp_path: Path, which: str) -> None:
    ports = {k: _free_port() for k in ("http", "door", "grpc", "metrics")}
    config_file = tmp_path / "taken.yaml"
    config_file.write_text(yaml.safe_dump(_config(ports), sort_keys=False))
    with socket.socket() as holder:  # another program, listening
        holder.bind(("127.0.0.1", ports[which]))
        holder.listen()
        done = subprocess.run(
            [*SLOMESH, "up", "--engine", "simulated", "--config", str(config_file),
             "--metrics-port", str(ports["metrics"]), "--exit-after-start"],
            capture_output=True, text=True, timeout=120, cwd=ROOT,
        )  # fmt: skip
    field = "front_door.port" if which == "door" else "http_options.port"
    err = done.stderr.strip()
    assert done.returncode == 2
    assert len(err.splitlines()) == 1 and f"{field}: port {ports[which]}" in err, err
