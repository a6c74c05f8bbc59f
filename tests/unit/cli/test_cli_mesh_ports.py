"""`slomesh up` owns its ports: it refuses to start beside another mesh instead of sharing."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from shared.rpc.mesh_auth import MESH_TOKEN_ENV
from slomesh.launch import mesh


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(http_port: int, grpc_port: int) -> dict[str, object]:
    """Serve's HTTP proxy and its gRPC proxy (on: servicers listed)."""
    return {
        "http_options": {"host": "127.0.0.1", "port": http_port},
        "grpc_options": {"port": grpc_port, "grpc_servicer_functions": ["m:add_X"]},
        "applications": [{"name": "x"}],
    }


def test_free_ports_pass() -> None:
    mesh.check_ports_free(_config(_free_port(), _free_port()))


@pytest.mark.parametrize("which", ["http", "grpc"])
def test_a_taken_port_is_refused_naming_it(which: str) -> None:
    http_port, grpc_port = _free_port(), _free_port()
    family, host = (socket.AF_INET, "127.0.0.1") if which == "http" else (socket.AF_INET6, "::")
    holder = socket.socket(family, socket.SOCK_STREAM)
    # the way Serve's proxies bind: SO_REUSEPORT lets a second proxy share the port silently
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    holder.bind((host, http_port if which == "http" else grpc_port))
    holder.listen()
    try:
        port = http_port if which == "http" else grpc_port
        with pytest.raises(mesh.PortTaken, match=f"{which}_options.port: port {port}"):
            mesh.check_ports_free(_config(http_port, grpc_port))
    finally:
        holder.close()


def test_mesh_token_is_generated_kept_private_and_reloaded(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv(MESH_TOKEN_ENV, raising=False)
    token = mesh.ensure_mesh_token()
    path = mesh.mesh_token_file()
    assert path.read_text() == token and os.environ[MESH_TOKEN_ENV] == token
    assert path.stat().st_mode & 0o777 == 0o600
    monkeypatch.delenv(MESH_TOKEN_ENV)
    mesh.load_mesh_token()  # what `slomesh status` does in another process
    assert os.environ[MESH_TOKEN_ENV] == token
    monkeypatch.setenv(MESH_TOKEN_ENV, "given")
    assert mesh.ensure_mesh_token() == "given"  # a configured secret wins


def test_packaged_configs_are_found_from_any_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    for path in [*mesh.CONFIGS.values(), *mesh.DEFAULT_PROFILES.values()]:
        assert path.is_absolute() and path.exists()


def test_connections_of_a_stopped_listener_do_not_make_the_port_taken() -> None:
    # Serve's proxy listens with SO_REUSEPORT and without SO_REUSEADDR; after it stops, its
    # accepted connections linger in TIME_WAIT for a minute and a plain test bind fails though
    # nothing listens (a mesh restarted at once was refused: "port 8000 taken")
    http_port, grpc_port = _free_port(), _free_port()
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    listener.bind(("127.0.0.1", http_port))
    listener.listen()
    client = socket.create_connection(("127.0.0.1", http_port))
    served, _ = listener.accept()
    served.close()  # the server side closes first: its end goes to TIME_WAIT
    client.close()
    listener.close()
    probe = socket.socket()
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    with pytest.raises(OSError):  # the state this test is about (else it proves nothing)
        probe.bind(("127.0.0.1", http_port))
    probe.close()
    mesh.check_ports_free(_config(http_port, grpc_port))  # free: nothing answers there
