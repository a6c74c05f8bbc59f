"""The ingress replicas' own gRPC server (grpc_door.py): a real grpc.aio server on loopback over
the in-process ingress (test double for the mesh). API keys apply to Ingress.Generate as to
HTTP; errors keep their status; the port is shared between replicas and a taken one fails
naming the field."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import grpc
import pytest
from pydantic import ValidationError

from services.ingress.args import IngressArgs
from services.ingress.core.grpc_door import GrpcDoorConfig, grpc_target
from services.ingress.grpc_door import GrpcDoor, open_server
from shared.rpc.slomesh.v1 import ingress_pb2, ingress_pb2_grpc, replica_pb2
from tests.unit.ingress.conftest import FakeMesh, build_ingress
from tests.unit.ingress.vllm_double import error_body

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
    mesh: FakeMesh | None = None,
    **fields: Any,
) -> tuple[grpc.StatusCode, str, list[ingress_pb2.GenerateChunk]]:
    _, instance = build_ingress(monkeypatch, mesh or FakeMesh(), **ingress_args)
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
    mesh = FakeMesh()
    got, details, chunks = _serve_and_call(monkeypatch, {"api_keys": api_keys}, metadata, mesh)
    assert got == code, details
    if code == grpc.StatusCode.OK:
        assert chunks[-1].finished and "".join(c.text for c in chunks) == "w1 w2 w3 "
    else:
        assert not [c for c in chunks if c.text]  # nothing generated for a refused caller
        assert not mesh.forwarded  # nothing reached a replica
        assert KEY not in details and "sk-wrong" not in details  # keys are never echoed


def test_generate_unknown_model_is_not_found_in_vllms_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mesh = FakeMesh()
    got, details, _ = _serve_and_call(monkeypatch, {}, [], mesh, model="nope")
    assert got == grpc.StatusCode.NOT_FOUND
    assert details == "The model `nope` does not exist. Valid aliases: llama, qwen."
    assert not mesh.forwarded


@pytest.mark.parametrize(
    ("fields", "route", "body"),
    [
        # slomesh's own limits on these are gone: vLLM judges them (its leniency wins)
        (
            {"max_tokens": 100000, "temperature": 9.0, "priority": 5000},
            "/v1/completions",
            {"prompt": "hello", "max_tokens": 100000, "temperature": 9.0, "priority": 5000},
        ),
        (
            {"slo_class": "interactive"},
            "/v1/completions",
            {"prompt": "hello"},
        ),
        (
            {"messages": [ingress_pb2.ChatMessage(role="user", content="hi")]},
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "hi"}]},
        ),
    ],
)
def test_generate_sends_an_openai_body_to_vllm(
    monkeypatch: pytest.MonkeyPatch, fields: dict[str, Any], route: str, body: dict[str, Any]
) -> None:
    """gRPC Generate takes the HTTP routes' path: one streamed OpenAI body, the SLO as slomesh's
    extension (removed before vLLM); the events' text comes back as chunks."""
    mesh = FakeMesh()
    got, details, chunks = _serve_and_call(monkeypatch, {}, [], mesh, **fields)
    assert got == grpc.StatusCode.OK, details
    (sent,) = mesh.forwarded
    forwarded = json.loads(sent.http.body)
    assert sent.http.path == route
    assert forwarded == {"model": "llama", "stream": True, "temperature": 0.0, **body}
    assert "".join(c.text for c in chunks) == "w1 w2 w3 "
    assert (chunks[-1].finished, chunks[-1].finish_reason, chunks[-1].output_tokens) == (
        True,
        "stop",
        3,
    )


class _RefusingMesh(FakeMesh):
    """A replica whose vLLM refuses the call (its 400 JSON, not an event stream)."""

    async def stream(
        self, application: str, kind: str, method: str, message: Any, **kw: Any
    ) -> Any:
        self.calls.append((application, method))
        request = replica_pb2.ReplicaGenerateRequest.FromString(message.SerializeToString())
        rid = request.meta.request_id
        error = error_body(400, "max_tokens is too large", "BadRequestError", "max_tokens")
        start = replica_pb2.ReplicaChunk(request_id=rid, http_status=400)
        start.headers.add(name="content-type", value="application/json")
        for chunk in (
            replica_pb2.ReplicaChunk(request_id=rid),
            start,
            replica_pb2.ReplicaChunk(request_id=rid, body=json.dumps(error).encode()),
            replica_pb2.ReplicaChunk(request_id=rid, finished=True, finish_reason="error"),
        ):
            yield chunk


def test_generate_refused_by_vllm_keeps_its_status_and_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    got, details, chunks = _serve_and_call(monkeypatch, {}, [], _RefusingMesh())
    assert (got, details) == (grpc.StatusCode.INVALID_ARGUMENT, "max_tokens is too large")
    assert not [c for c in chunks if c.finished]


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
