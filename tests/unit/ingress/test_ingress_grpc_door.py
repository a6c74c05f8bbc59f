"""The ingress replicas' own gRPC server (grpc_door.py): a real grpc.aio server on loopback over
the in-process ingress (test double for the mesh). API keys apply to Ingress.Generate as to
HTTP; errors keep their status; the port is shared between replicas and a taken one fails
naming the field."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import grpc
import pytest
from pydantic import ValidationError

from services.ingress.args import IngressArgs
from services.ingress.core.grpc_door import GrpcDoorConfig, grpc_target
from services.ingress.grpc_door import GrpcDoor, open_server
from shared.rpc.slomesh.v1 import ingress_pb2, ingress_pb2_grpc
from tests.unit.ingress.conftest import FakeMesh, build_ingress

KEY = "sk-tenant-a-secret"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _generate(
    target: str, metadata: list[tuple[str, str]], **fields: Any
) -> tuple[grpc.StatusCode, str, list[ingress_pb2.GenerateChunk]]:
    request = ingress_pb2.GenerateRequest(
        model=fields.pop("model", "llama"), prompt=fields.pop("prompt", "hello"), **fields
    )
    chunks: list[ingress_pb2.GenerateChunk] = []
    async with grpc.aio.insecure_channel(target) as channel:
        stub = ingress_pb2_grpc.IngressStub(channel)  # type: ignore[no-untyped-call]
        try:
            async for chunk in stub.Generate(request, metadata=metadata, timeout=10):
                chunks.append(chunk)
        except grpc.aio.AioRpcError as err:
            return err.code(), err.details() or "", chunks
    return grpc.StatusCode.OK, "", chunks


def _serve_and_call(
    monkeypatch: pytest.MonkeyPatch,
    ingress_args: dict[str, Any],
    metadata: list[tuple[str, str]],
    **fields: Any,
) -> tuple[grpc.StatusCode, str, list[ingress_pb2.GenerateChunk]]:
    _, instance = build_ingress(monkeypatch, FakeMesh(), **ingress_args)
    config = GrpcDoorConfig(port=_free_port())

    async def run() -> tuple[grpc.StatusCode, str, list[ingress_pb2.GenerateChunk]]:
        door = GrpcDoor(instance, config, limit=8)
        door.start()
        try:
            return await _generate(grpc_target(config), metadata, **fields)
        finally:
            await door.stop()

    return asyncio.run(run())


KEYS = {"keys": {KEY: {"tenant": "tenant-a"}}}


@pytest.mark.parametrize(
    ("api_keys", "metadata", "code"),
    [
        ({}, [], grpc.StatusCode.OK),  # no keys configured: anonymous
        ({}, [("authorization", "Bearer EMPTY")], grpc.StatusCode.OK),
        ({**KEYS, "required": True}, [], grpc.StatusCode.UNAUTHENTICATED),
        (
            {**KEYS, "required": True},
            [("authorization", "Bearer sk-wrong")],
            grpc.StatusCode.UNAUTHENTICATED,
        ),
        (
            {**KEYS, "required": True},
            [("authorization", "sk-no-bearer")],
            grpc.StatusCode.UNAUTHENTICATED,
        ),
        ({**KEYS, "required": True}, [("authorization", f"Bearer {KEY}")], grpc.StatusCode.OK),
        (KEYS, [("authorization", "Bearer sk-wrong")], grpc.StatusCode.UNAUTHENTICATED),
        (KEYS, [], grpc.StatusCode.OK),  # keys not required: a caller without one is anonymous
    ],
)
def test_generate_applies_api_keys_as_http_does(
    monkeypatch: pytest.MonkeyPatch,
    api_keys: dict[str, Any],
    metadata: list[tuple[str, str]],
    code: grpc.StatusCode,
) -> None:
    got, details, chunks = _serve_and_call(monkeypatch, {"api_keys": api_keys}, metadata)
    assert got == code, details
    if code == grpc.StatusCode.OK:
        assert chunks[-1].finished and "".join(c.text for c in chunks) == "w1 w2 w3 "
    else:
        assert not [c for c in chunks if c.text]  # nothing generated for a refused caller
        assert KEY not in details and "sk-wrong" not in details  # keys are never echoed


@pytest.mark.parametrize(
    ("fields", "code", "names"),
    [
        ({"model": "nope"}, grpc.StatusCode.NOT_FOUND, "nope"),
        ({"max_tokens": 100000}, grpc.StatusCode.INVALID_ARGUMENT, "max_tokens"),
        ({"temperature": 9.0}, grpc.StatusCode.INVALID_ARGUMENT, "temperature"),
        ({"priority": 5000}, grpc.StatusCode.INVALID_ARGUMENT, "priority"),
    ],
)
def test_generate_errors_keep_their_status_and_name_the_field(
    monkeypatch: pytest.MonkeyPatch, fields: dict[str, Any], code: grpc.StatusCode, names: str
) -> None:
    got, details, _ = _serve_and_call(monkeypatch, {}, [], **fields)
    assert got == code and names in details, (got, details)


def test_replicas_share_the_port_and_a_taken_port_fails_naming_the_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, instance = build_ingress(monkeypatch, FakeMesh())
    config = GrpcDoorConfig(port=_free_port())

    async def shared() -> None:
        first, _ = open_server(instance, config, 4)
        second, _ = open_server(instance, config, 4)  # the node's next replica: SO_REUSEPORT
        await first.stop(None)
        await second.stop(None)

    asyncio.run(shared())

    with socket.socket() as other:  # another program, without SO_REUSEPORT
        other.bind(("127.0.0.1", 0))
        other.listen()
        taken = GrpcDoorConfig(port=other.getsockname()[1])

        async def refused() -> None:
            open_server(instance, taken, 4)

        with pytest.raises(RuntimeError, match=r"grpc_door\.port"):
            asyncio.run(refused())


@pytest.mark.parametrize(
    ("settings", "field", "rule"),
    [
        ({"host": "localhost"}, "host", "IP address literal or 'node'"),
        ({"port": 0}, "port", "greater than or equal to 1"),
        ({"max_in_flight_requests": 0}, "max_in_flight_requests", "greater than or equal to 1"),
        ({"prot": 9100}, "prot", "Extra inputs are not permitted"),
    ],
)
def test_grpc_door_config_rejects_bad_values_naming_the_field(
    settings: dict[str, Any], field: str, rule: str
) -> None:
    with pytest.raises(ValidationError) as err:
        IngressArgs.model_validate({"models": [{"name": "m"}], "grpc_door": settings})
    text = str(err.value)
    assert f"grpc_door.{field}" in text and rule in text, text


@pytest.mark.parametrize(
    ("settings", "target"),
    [
        ({}, "127.0.0.1:9100"),
        ({"host": "::1", "port": 9200}, "[::1]:9200"),
        ({"host": "0.0.0.0"}, "127.0.0.1:9100"),
    ],
)
def test_grpc_door_target(settings: dict[str, Any], target: str) -> None:
    assert grpc_target(GrpcDoorConfig.model_validate(settings)) == target
