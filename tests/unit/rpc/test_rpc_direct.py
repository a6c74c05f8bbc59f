"""Direct replica streams: the replica's own gRPC server (real grpc.aio, loopback)
refuses calls without the mesh credential, streams with it and cancels the deployment's stream
when the caller goes away; MeshClient streams a replica's Generate straight from it once the
address is published, keeps the handle when none is, and asks again after UNAVAILABLE."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from grpc_fakes import status_with_token

from services.replica.direct_server import start_server
from shared.rpc.client import CallFailed, MeshClient
from shared.rpc.direct import DirectReplicas
from shared.rpc.mesh_auth import MESH_TOKEN_ENV, MESH_TOKEN_METADATA
from shared.rpc.slomesh.v1 import common_pb2, replica_pb2, replica_pb2_grpc


class FakeReplica:
    """The deployment's methods as direct_server.py calls them."""

    def __init__(self) -> None:
        self.closed = asyncio.Event()
        self.seen_traceparent = ""

    async def Generate(
        self, request: replica_pb2.ReplicaGenerateRequest, grpc_context: Any = None
    ) -> AsyncIterator[replica_pb2.ReplicaChunk]:
        md = dict(grpc_context.invocation_metadata())
        self.seen_traceparent = md.get("traceparent", "")
        if request.meta.max_tokens > 100:
            raise ValueError("max_tokens: at most 100")
        try:
            yield replica_pb2.ReplicaChunk(request_id=request.meta.request_id)  # accept marker
            for k in range(1, request.meta.max_tokens + 1):
                yield replica_pb2.ReplicaChunk(
                    output_tokens=k, finished=k == request.meta.max_tokens
                )
                await asyncio.sleep(0.01 if request.meta.max_tokens > 10 else 0)
        finally:
            self.closed.set()

    async def Status(self, request: Any, grpc_context: Any = None) -> common_pb2.ReplicaState:
        return common_pb2.ReplicaState(waiting=3)


def _gen(max_tokens: int) -> replica_pb2.ReplicaGenerateRequest:
    meta = common_pb2.RequestMeta(request_id="r1", max_tokens=max_tokens)
    return replica_pb2.ReplicaGenerateRequest(meta=meta, prompt="hi")


@pytest.mark.parametrize(
    ("token", "max_tokens", "want"),
    [
        ("s3cret", 3, "OK"),
        ("", 3, "UNAUTHENTICATED"),
        ("wrong", 3, "UNAUTHENTICATED"),
        ("s3cret", 101, "INVALID_ARGUMENT"),  # the replica's limits, as a status
    ],
)
def test_replica_server_requires_the_mesh_credential(
    monkeypatch: pytest.MonkeyPatch, token: str, max_tokens: int, want: str
) -> None:
    monkeypatch.setenv(MESH_TOKEN_ENV, "s3cret")

    async def run() -> tuple[str, int]:
        server, address = await start_server(FakeReplica(), "127.0.0.1")
        try:
            async with grpc.aio.insecure_channel(address) as ch:
                stub = replica_pb2_grpc.ReplicaStub(ch)  # type: ignore[no-untyped-call]
                md = [(MESH_TOKEN_METADATA, token)] if token else []
                n = 0
                try:
                    async for chunk in stub.Generate(_gen(max_tokens), metadata=md):
                        n = chunk.output_tokens
                except grpc.aio.AioRpcError as err:
                    return err.code().name, n
                return "OK", n
        finally:
            await server.stop(None)

    code, tokens = asyncio.run(run())
    assert code == want
    assert tokens == (max_tokens if want == "OK" else 0)


def test_mesh_client_streams_direct_and_cancels_on_close(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MESH_TOKEN_ENV, "s3cret")
    replica = FakeReplica()

    async def run() -> tuple[int, bool, str]:
        server, address = await start_server(replica, "127.0.0.1")
        client = MeshClient()
        client.direct = DirectReplicas(lambda app: _answer(address))
        try:
            stream = client.stream(
                "replica-0", "replica", "Generate", _gen(50), trace_headers={"traceparent": "tp"}
            )
            got = 0
            async for chunk in stream:
                got = chunk.output_tokens
                if got == 2:
                    break  # the caller goes away mid-stream
            await stream.aclose()  # type: ignore[attr-defined]
            await asyncio.wait_for(replica.closed.wait(), 5)
            return got, replica.closed.is_set(), replica.seen_traceparent
        finally:
            await client.close()
            await server.stop(None)

    got, closed, traceparent = asyncio.run(run())
    assert (got, closed, traceparent) == (2, True, "tp")


async def _answer(address: str) -> str:
    return address


@pytest.mark.parametrize(("published", "direct"), [("", False), ("127.0.0.1:1", True)])
def test_direct_replicas_resolution(published: str, direct: bool) -> None:
    asked: list[str] = []

    async def resolve(app: str) -> str:
        asked.append(app)
        return published

    async def run() -> tuple[bool, bool]:
        d = DirectReplicas(resolve)
        first = await d.stub("replica-0") is not None
        second = await d.stub("replica-0") is not None
        await d.close()
        return first, second

    first, second = asyncio.run(run())
    assert first is direct and second is direct
    assert asked == ["replica-0"]  # asked once: cached, or the handle for a while


def test_unavailable_replica_is_asked_for_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MESH_TOKEN_ENV, "s3cret")
    asked: list[str] = []

    async def resolve(app: str) -> str:
        asked.append(app)
        return "127.0.0.1:1"  # nothing listens there

    async def run() -> str:
        client = MeshClient()
        client.direct = DirectReplicas(resolve)
        try:
            async for _ in client.stream("replica-0", "replica", "Generate", _gen(2)):
                pass
        except CallFailed as err:
            return err.code
        finally:
            await client.close()
        return "OK"

    assert asyncio.run(run()) == "UNAVAILABLE"
    assert asked == ["replica-0", "replica-0"]  # asked again at once: the same address, no retry
    assert asyncio.run(run()) == "UNAVAILABLE"
    assert asked == ["replica-0"] * 4  # forgotten: the next stream asks first


def test_a_replaced_replica_is_streamed_from_its_new_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Serve replaced the replica (new port): the cached address fails UNAVAILABLE before any
    message; the stream is retried once on the new address, with no error for the caller."""
    monkeypatch.setenv(MESH_TOKEN_ENV, "s3cret")
    replica = FakeReplica()

    async def run() -> tuple[int, list[str]]:
        server, address = await start_server(replica, "127.0.0.1")
        answers = ["127.0.0.1:1", address]  # the old replica's port, then the new one's
        asked: list[str] = []

        async def resolve(app: str) -> str:
            asked.append(answers[min(len(asked), 1)])
            return asked[-1]

        client = MeshClient()
        client.direct = DirectReplicas(resolve)
        try:
            got = 0
            async for chunk in client.stream("replica-0", "replica", "Generate", _gen(3)):
                got = chunk.output_tokens
            return got, asked
        finally:
            await client.close()
            await server.stop(None)

    got, asked = asyncio.run(run())
    assert got == 3
    assert len(asked) == 2


@pytest.mark.parametrize(("token", "want"), [("s3cret", "OK"), ("", "UNAUTHENTICATED")])
def test_replica_server_unary_methods_require_the_mesh_credential(
    monkeypatch: pytest.MonkeyPatch, token: str, want: str
) -> None:
    monkeypatch.setenv(MESH_TOKEN_ENV, "s3cret")

    async def run() -> str:
        server, address = await start_server(FakeReplica(), "127.0.0.1")
        try:
            stub_of = replica_pb2_grpc.ReplicaStub
            return await status_with_token(
                address, stub_of, "Status", replica_pb2.StatusQuery(), token
            )
        finally:
            await server.stop(None)

    assert asyncio.run(run()) == want
