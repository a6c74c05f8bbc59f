"""Many replica streams on one Replica.Streams call (real grpc.aio, loopback): requests share
the call and its messages, a request's own failure ends only that request with the status a
Generate call would have, closing a stream early aborts its request on the replica, and the
call refuses a caller without the mesh credential."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from services.replica.direct_server import start_server
from shared.rpc.client import CallFailed, MeshClient
from shared.rpc.direct import DirectReplicas
from shared.rpc.mesh_auth import MESH_TOKEN_ENV, MESH_TOKEN_METADATA
from shared.rpc.replica_streams import StreamFailed, StreamsCall
from shared.rpc.slomesh.v1 import common_pb2, replica_pb2, replica_pb2_grpc


class PacedReplica:
    """Generate as the deployment streams it: an accept marker, then `max_tokens` chunks, all
    requests stepping together (as an engine's batch does)."""

    def __init__(self) -> None:
        self.step = asyncio.Event()
        self.aborted: list[str] = []
        self.traceparents: list[str] = []

    async def Generate(
        self, request: replica_pb2.ReplicaGenerateRequest, grpc_context: Any = None
    ) -> AsyncIterator[replica_pb2.ReplicaChunk]:
        rid = request.meta.request_id
        self.traceparents.append(dict(grpc_context.invocation_metadata()).get("traceparent", ""))
        if request.meta.max_tokens > 100:
            raise ValueError("max_tokens: at most 100")
        done = False
        try:
            yield replica_pb2.ReplicaChunk(request_id=rid)
            for k in range(1, request.meta.max_tokens + 1):
                await asyncio.sleep(0.02)  # one engine step, shared by every request
                yield replica_pb2.ReplicaChunk(
                    request_id=rid, output_tokens=k, finished=k == request.meta.max_tokens
                )
            done = True
        finally:
            if not done:
                self.aborted.append(rid)


def _gen(rid: str, max_tokens: int) -> replica_pb2.ReplicaGenerateRequest:
    meta = common_pb2.RequestMeta(request_id=rid, max_tokens=max_tokens)
    return replica_pb2.ReplicaGenerateRequest(meta=meta, prompt="hi")


async def _answer(address: str) -> str:
    return address


async def _collect(
    client: MeshClient, rid: str, max_tokens: int, seen: dict[str, int] | None = None
) -> tuple[str, int]:
    got = 0
    try:
        async for chunk in client.stream(
            "replica-0", "replica", "Generate", _gen(rid, max_tokens), {"traceparent": rid}
        ):
            got = chunk.output_tokens
            if seen is not None:
                seen[rid] = got
    except CallFailed as err:
        return err.code, got
    return "OK", got


def test_requests_share_one_call_and_its_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MESH_TOKEN_ENV, "s3cret")
    replica = PacedReplica()

    async def run() -> tuple[list[tuple[str, int]], StreamsCall, list[str]]:
        server, address = await start_server(replica, "127.0.0.1")
        client = MeshClient()
        client.direct = DirectReplicas(lambda app: _answer(address))
        try:
            call = await client.direct.streams("replica-0")
            assert call is not None
            results = await asyncio.gather(
                *(_collect(client, f"r{i}", 5) for i in range(8)),
                _collect(client, "too-long", 101),
            )
            assert await client.direct.streams("replica-0") is call  # still the same call
            return list(results), call, sorted(replica.traceparents)
        finally:
            await client.close()
            await server.stop(None)

    results, call, traceparents = asyncio.run(run())
    # each request streams as its own Generate would; the refused one fails alone
    assert results == [("OK", 5)] * 8 + [("INVALID_ARGUMENT", 0)]
    assert traceparents == sorted([f"r{i}" for i in range(8)] + ["too-long"])
    # 9 opens and 8 x 6 chunks + 9 ends travelled in far fewer gRPC messages
    assert call.messages_up < 9
    assert call.messages_down < (8 * 6 + 9) / 2


def test_closing_a_stream_early_aborts_only_its_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MESH_TOKEN_ENV, "s3cret")
    replica = PacedReplica()

    async def run() -> tuple[int, tuple[str, int], list[str]]:
        server, address = await start_server(replica, "127.0.0.1")
        client = MeshClient()
        client.direct = DirectReplicas(lambda app: _answer(address))
        try:
            other = asyncio.ensure_future(_collect(client, "stays", 10))
            stream = client.stream("replica-0", "replica", "Generate", _gen("leaves", 50), {})
            got = 0
            async for chunk in stream:
                got = chunk.output_tokens
                if got == 2:
                    break  # the client goes away mid-stream
            await stream.aclose()  # type: ignore[attr-defined]
            for _ in range(100):
                if replica.aborted:
                    break
                await asyncio.sleep(0.02)
            return got, await other, list(replica.aborted)
        finally:
            await client.close()
            await server.stop(None)

    got, other, aborted = asyncio.run(run())
    assert got == 2
    assert aborted == ["leaves"]
    assert other == ("OK", 10)


def test_the_call_fails_every_stream_on_it_when_the_replica_goes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(MESH_TOKEN_ENV, "s3cret")

    async def run() -> tuple[list[tuple[str, int]], bool]:
        server, address = await start_server(PacedReplica(), "127.0.0.1")
        client = MeshClient()
        client.direct = DirectReplicas(lambda app: _answer(address))
        call = await client.direct.streams("replica-0")
        assert call is not None
        try:
            seen: dict[str, int] = {}
            streams = [asyncio.ensure_future(_collect(client, f"r{i}", 50, seen)) for i in range(3)]
            for _ in range(3000):  # until every stream is under way
                if len([n for n in seen.values() if n > 0]) == 3:
                    break
                await asyncio.sleep(0.01)
            await server.stop(None)  # the replica is gone mid-stream
            return list(await asyncio.gather(*streams)), call.alive
        finally:
            await client.close()

    results, alive = asyncio.run(run())
    assert [code for code, _ in results] == ["UNAVAILABLE"] * 3
    assert all(0 < got < 50 for _, got in results)
    assert not alive  # the next stream opens a new call


def test_streams_refuses_a_caller_without_the_mesh_credential(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(MESH_TOKEN_ENV, "s3cret")

    async def run() -> str:
        server, address = await start_server(PacedReplica(), "127.0.0.1")
        try:
            async with grpc.aio.insecure_channel(address) as ch:
                stub = replica_pb2_grpc.ReplicaStub(ch)  # type: ignore[no-untyped-call]
                call = StreamsCall(stub, [(MESH_TOKEN_METADATA, "wrong")])
                try:
                    async for _ in call.stream(_gen("r", 3), {}):
                        pass
                except StreamFailed as err:
                    return err.status
                finally:
                    call.close()
                    await call.wait_closed()
                return "OK"
        finally:
            await server.stop(None)

    assert asyncio.run(run()) == "UNAUTHENTICATED"


class BigReplica:
    """Answers every request with one 3 MiB body (a long non-streamed answer)."""

    async def Generate(
        self, request: replica_pb2.ReplicaGenerateRequest, grpc_context: Any = None
    ) -> AsyncIterator[replica_pb2.ReplicaChunk]:
        rid = request.meta.request_id
        yield replica_pb2.ReplicaChunk(request_id=rid, body=b"x" * (3 << 20), finished=True)


def test_messages_together_may_pass_grpcs_default_size_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # three 3 MiB answers ready together travel in one StreamsDown (above gRPC's 4 MiB default)
    monkeypatch.setenv(MESH_TOKEN_ENV, "s3cret")

    async def run() -> list[int]:
        server, address = await start_server(BigReplica(), "127.0.0.1")
        client = MeshClient()
        client.direct = DirectReplicas(lambda app: _answer(address))

        async def one(rid: str) -> int:
            big = _gen(rid, 1)
            big.http.body = b"p" * (3 << 20)  # and three 3 MiB prompts go up together
            chunks = client.stream("replica-0", "replica", "Generate", big, {})
            return sum([len(c.body) async for c in chunks])

        try:
            return list(await asyncio.gather(*(one(f"r{i}") for i in range(3))))
        finally:
            await client.close()
            await server.stop(None)

    assert asyncio.run(run()) == [3 << 20] * 3


class CancelledInside:
    """A Generate whose own work is cancelled under it (not the caller's cancel)."""

    async def Generate(
        self, request: replica_pb2.ReplicaGenerateRequest, grpc_context: Any = None
    ) -> AsyncIterator[replica_pb2.ReplicaChunk]:
        yield replica_pb2.ReplicaChunk(request_id=request.meta.request_id)
        inner = asyncio.ensure_future(asyncio.sleep(10))
        inner.cancel()
        await inner  # raises CancelledError into Generate


def test_a_cancel_inside_generate_ends_the_stream_instead_of_leaving_it_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(MESH_TOKEN_ENV, "s3cret")

    async def run() -> tuple[str, int]:
        server, address = await start_server(CancelledInside(), "127.0.0.1")
        client = MeshClient(stream_idle_timeout_s=30.0)
        client.direct = DirectReplicas(lambda app: _answer(address))
        try:
            return await asyncio.wait_for(_collect(client, "r", 5), 10.0)
        finally:
            await client.close()
            await server.stop(None)

    assert asyncio.run(run()) == ("CANCELLED", 0)
