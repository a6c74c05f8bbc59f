"""`slomesh up` and the shipped configs own their listeners: each one where the config says
(loopback by default), none serving the API beyond loopback without required API keys unless
the operator accepts it explicitly, and the ingress refuses the same for its own doors (so a
`serve deploy` of such a config fails too)."""

from __future__ import annotations

import copy
import json
import socket
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from services.ingress.args import IngressArgs
from slomesh.cli.main import main
from slomesh.launch import listeners, mesh

SHIPPED = sorted(Path(mesh.DEPLOY_DIR).glob("*.yaml"))
KEYS = {"sk-ops-1": {"tenant": "ops"}}


def _with_ingress(config: dict[str, Any], **args: Any) -> dict[str, Any]:
    out = copy.deepcopy(config)
    for app in out["applications"]:
        if app["name"] == "ingress":
            app["args"].update(args)
    return out


def _simulated() -> dict[str, Any]:
    return mesh.load_config(mesh.CONFIGS["simulated"])


def test_default_listeners_are_loopback_and_serve_grpc_proxy_is_off() -> None:
    found = listeners.listeners(_simulated(), "127.0.0.1", 8080)
    assert [(x.field, x.host, x.port) for x in found] == [
        ("http_options.port", "127.0.0.1", 8000),
        ("ingress front_door.port", "127.0.0.1", 8100),
        ("ingress grpc_door.port", "127.0.0.1", 9100),
        ("--metrics-port", "127.0.0.1", 8080),
    ]
    listeners.check_exposure(_simulated(), found)  # nothing beyond loopback: no keys needed
    assert mesh.endpoints(_simulated())[1] == "127.0.0.1:9100"  # gRPC clients: the door


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda c: _with_ingress(c, front_door={"host": "0.0.0.0"}), "ingress front_door.port"),
        (lambda c: _with_ingress(c, grpc_door={"host": "node"}), "ingress grpc_door.port"),
        (lambda c: {**c, "http_options": {"host": "0.0.0.0", "port": 8000}}, "http_options.port"),
        (lambda c: mesh.with_serve_grpc_proxy(c), "grpc_options.port"),  # binds [::] always
    ],
)
def test_public_api_listener_without_keys_is_refused_unless_allowed(
    change: Any, named: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = change(_simulated())
    found = listeners.listeners(config)
    with pytest.raises(listeners.PublicWithoutKeys) as err:
        listeners.check_exposure(config, found)
    message = str(err.value)
    assert named in message and "--allow-unauthenticated-public-listeners" in message
    assert "\n" not in message  # one line
    allowed = listeners.allow_public_listeners(config)
    listeners.check_exposure(allowed, listeners.listeners(allowed))
    keyed = _with_ingress(config, api_keys={"keys": KEYS, "required": True})
    listeners.check_exposure(keyed, listeners.listeners(keyed))
    not_required = _with_ingress(config, api_keys={"keys": KEYS})  # anonymous still served
    with pytest.raises(listeners.PublicWithoutKeys):
        listeners.check_exposure(not_required, listeners.listeners(not_required))


@pytest.mark.parametrize("door", ["front_door", "grpc_door"])
def test_the_ingress_itself_refuses_a_public_door_without_required_keys(door: str) -> None:
    base = {"models": [{"name": "m"}], door: {"host": "0.0.0.0"}}
    with pytest.raises(ValidationError) as err:
        IngressArgs.model_validate(base)
    assert f"{door}.host" in str(err.value) and "api_keys.required" in str(err.value)
    IngressArgs.model_validate({**base, "allow_unauthenticated_public_listeners": True})
    IngressArgs.model_validate({**base, "api_keys": {"keys": KEYS, "required": True}})
    IngressArgs.model_validate({**base, door: {"host": "::1"}})  # loopback: fine


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_shipped_configs_listen_beyond_loopback_only_with_required_keys(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLOMESH_API_KEYS", json.dumps(KEYS))  # gpu-multinode reads keys there
    config = mesh.load_config(path)
    found = listeners.listeners(config)
    listeners.check_exposure(config, found)  # no --allow-... needed
    args = listeners.ingress_args(config)
    assert args is not None
    raw = next(a["args"] for a in config["applications"] if a["name"] == "ingress")
    assert not raw.get(listeners.ALLOW_FIELD)
    IngressArgs.model_validate(raw)  # what the ingress checks under `serve deploy`
    public = [x for x in found if not x.host.startswith("127.")]
    assert not public or args.api_keys.required, public
    if not args.api_keys.required:  # the local configs: Serve's gRPC proxy stays off
        assert not listeners.serve_grpc_proxy_enabled(config)


def test_gpu_multinode_without_its_keys_does_not_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLOMESH_API_KEYS", raising=False)
    config = mesh.load_config(Path(mesh.DEPLOY_DIR) / "gpu-multinode.yaml")
    raw = next(a["args"] for a in config["applications"] if a["name"] == "ingress")
    with pytest.raises(ValidationError, match=r"SLOMESH_API_KEYS is not set"):
        IngressArgs.model_validate(raw)


def test_grpc_transport_needs_serve_grpc_proxy_turned_on() -> None:
    config = _with_ingress(_simulated(), transport="grpc")
    with pytest.raises(ValueError, match="grpc_servicer_functions"):
        mesh.check_transport(config)
    mesh.check_transport(mesh.with_serve_grpc_proxy(config))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_taken_grpc_door_port_is_refused_naming_it() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        config = _with_ingress(_simulated(), grpc_door={"port": port})
        config["http_options"] = {"host": "127.0.0.1", "port": _free_port()}
        config = _with_ingress(config, front_door={"port": _free_port()})
        with pytest.raises(mesh.PortTaken, match=f"ingress grpc_door.port: port {port} "):
            mesh.check_ports_free(config)


def test_slomesh_up_refuses_a_public_door_in_one_line_before_starting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import yaml

    monkeypatch.setenv("RAY_AUTH_MODE", "token")  # main sets it for the embedded Ray

    config = _with_ingress(_simulated(), front_door={"host": "0.0.0.0"})
    path = tmp_path / "open.yaml"
    path.write_text(yaml.safe_dump(config))
    code = main(["up", "--config", str(path), "--engine", "simulated"])
    err = capsys.readouterr().err.strip()
    assert code != 0
    assert len(err.splitlines()) == 1 and "front_door.port (0.0.0.0)" in err, err
