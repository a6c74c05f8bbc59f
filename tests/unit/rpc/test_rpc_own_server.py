"""A service's own gRPC server for its unary methods (shared/rpc/own_server.py; the scheduler's:
services/scheduler/own_server.py): real grpc.aio on loopback. It refuses calls without the mesh
credential, answers a method's status as a handle caller would have seen it, and MeshClient
calls a scheduler's methods on it once the address is published (a handle otherwise)."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from grpc_fakes import status_with_token

from services.scheduler.args import SchedulerArgs
from services.scheduler.own_server import OwnServer
from shared.rpc.client import CallFailed, MeshClient
from shared.rpc.direct import DirectReplicas
from shared.rpc.invalid_argument import InvalidMessage
from shared.rpc.mesh_auth import MESH_TOKEN_ENV
from shared.rpc.own_server import start_unary_server
from shared.rpc.slomesh.v1 import scheduler_pb2, scheduler_pb2_grpc


class FakeScheduler:
    """Scheduler methods as the deployment has them (request, grpc_context=...)."""

    def __init__(self) -> None:
        self.contexts: list[Any] = []

    async def Health(self, request: Any, grpc_context: Any = None) -> Any:
        self.contexts.append(grpc_context)
        md = dict(grpc_context.invocation_metadata())
        return scheduler_pb2.HealthReply(can_admit=True, reason=md.get("traceparent", ""))

    async def Admit(self, request: Any, grpc_context: Any = None) -> Any:
        grpc_context.set_code(grpc.StatusCode.INVALID_ARGUMENT)  # as refuse_invalid does
        grpc_context.set_details("meta.max_tokens: must be at least 1")
        raise RuntimeError("refused")

    async def Report(self, request: Any, grpc_context: Any = None) -> Any:
        raise InvalidMessage("meta.request_id: must not be empty")

    async def Sync(self, request: Any, grpc_context: Any = None) -> Any:
        raise RuntimeError("a fault")


async def _answer(address: str) -> str:
    return address


@pytest.mark.parametrize(("token", "want"), [("s3cret", "OK"), ("", "UNAUTHENTICATED")])
def test_the_server_requires_the_mesh_credential(
    monkeypatch: pytest.MonkeyPatch, token: str, want: str
) -> None:
    monkeypatch.setenv(MESH_TOKEN_ENV, "s3cret")

    async def run() -> str:
        server, address = await start_unary_server(
            FakeScheduler(), scheduler_pb2_grpc, "Scheduler", "127.0.0.1"
        )
        try:
            stub_of = scheduler_pb2_grpc.SchedulerStub
            return await status_with_token(
                address, stub_of, "Health", scheduler_pb2.HealthQuery(), token
            )
        finally:
            await server.stop(None)

    assert asyncio.run(run()) == want


def test_mesh_client_calls_the_schedulers_own_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MESH_TOKEN_ENV, "s3cret")
    scheduler = FakeScheduler()

    async def run() -> tuple[Any, dict[str, str]]:
        server, address = await start_unary_server(
            scheduler, scheduler_pb2_grpc, "Scheduler", "127.0.0.1"
        )
        client = MeshClient()
        client.direct = DirectReplicas(lambda app: _answer(address))
        codes: dict[str, str] = {}
        try:
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr("shared.rpc.client._headers", lambda: {"traceparent": "tp"})
                reply = await client.call(
                    "scheduler", "scheduler", "Health", scheduler_pb2.HealthQuery()
                )
            for method, message in (
                ("Admit", scheduler_pb2.AdmitRequest()),
                ("Report", scheduler_pb2.CompletionReport()),
                ("Sync", scheduler_pb2.SyncBatch()),
            ):
                try:
                    await client.call("scheduler", "scheduler", method, message)
                except CallFailed as err:
                    codes[method] = f"{err.code} {err}"
            return reply, codes
        finally:
            await client.close()
            await server.stop(None)

    reply, codes = asyncio.run(run())
    assert reply.can_admit and reply.reason == "tp"  # went direct, with the trace context
    assert scheduler.contexts and scheduler.contexts[0] is not None
    assert codes["Admit"].startswith("INVALID_ARGUMENT") and "max_tokens" in codes["Admit"]
    assert codes["Report"].startswith("INVALID_ARGUMENT")  # what status_of gives a handle caller
    assert codes["Sync"].startswith("INTERNAL")


class _Scheduler(OwnServer):
    def __init__(self, grpc_host: str) -> None:
        self.args = SchedulerArgs.model_validate(
            {"replicas": [{"application": "r", "gpu": "g", "model": "m"}], "grpc_host": grpc_host}
        )


@pytest.mark.parametrize(
    ("token", "host", "serves"),
    [("s3cret", "127.0.0.1", True), ("", "127.0.0.1", False), ("s3cret", "", False)],
)
def test_a_scheduler_publishes_its_server_only_with_a_host_and_the_mesh_secret(
    monkeypatch: pytest.MonkeyPatch, token: str, host: str, serves: bool
) -> None:
    if token:
        monkeypatch.setenv(MESH_TOKEN_ENV, token)
    else:
        monkeypatch.delenv(MESH_TOKEN_ENV, raising=False)

    async def run() -> tuple[str, str]:
        sched = _Scheduler(host)
        first, again = await sched.Endpoint(), await sched.Endpoint()
        if sched._own_server is not None:
            await sched._own_server.stop(None)
        return first, again

    first, again = asyncio.run(run())
    assert (first != "") is serves and first == again  # started once


def test_asking_for_the_address_counts_against_the_calls_deadline() -> None:
    async def hangs(application: str) -> str:
        await asyncio.sleep(30)  # a handle call to a shard that is gone, not yet failed
        return ""

    async def run() -> str:
        client = MeshClient()
        client.direct = DirectReplicas(hangs)
        try:
            await client.call("scheduler", "scheduler", "Health", scheduler_pb2.HealthQuery(), 0.05)
        except CallFailed as err:
            return err.code
        finally:
            await client.close()
        return "OK"

    assert asyncio.run(run()) == "DEADLINE_EXCEEDED"
