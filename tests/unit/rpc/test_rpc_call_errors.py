"""Internal call failures keep what they mean (call_errors.py): only a callee that is gone is
UNAVAILABLE (retryable); its own exceptions are deterministic statuses. A replica stream that
hangs without dying fails DEADLINE_EXCEEDED after the idle timeout and is cancelled, over a
Serve handle and over a real direct gRPC stream; keepalive options are on the channels."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel
from ray import exceptions as rex
from ray.serve import exceptions as sex

from services.replica.direct_server import start_server
from shared.rpc.call_errors import retryable, status_of
from shared.rpc.client import CallFailed, MeshClient
from shared.rpc.direct import KEEPALIVE_CHANNEL_OPTIONS, UNLIMITED_MESSAGES, DirectReplicas
from shared.rpc.invalid_argument import InvalidMessage
from shared.rpc.mesh_auth import MESH_TOKEN_ENV, MeshCredentialRefused
from shared.rpc.slomesh.v1 import common_pb2, replica_pb2, scheduler_pb2


def _task_error(cause: BaseException) -> BaseException:
    """What a handle call raises when the callee raised `cause`."""
    err = rex.RayTaskError("Admit", "Traceback ...", cause)
    return err.as_instanceof_cause()


class _Model(BaseModel):
    n: int


def _validation_error() -> Exception:
    try:
        _Model.model_validate({"n": "x"})
    except Exception as err:
        return err
    raise AssertionError("expected a ValidationError")


@pytest.mark.parametrize(
    ("make", "status"),
    [
        (lambda: rex.ActorDiedError(), "UNAVAILABLE"),
        (lambda: rex.ActorUnavailableError("restarting", None), "UNAVAILABLE"),
        (lambda: sex.DeploymentUnavailableError("scheduler"), "UNAVAILABLE"),
        (lambda: _task_error(rex.ActorDiedError()), "UNAVAILABLE"),  # the callee's callee died
        (
            lambda: sex.BackPressureError(num_queued_requests=5, max_queued_requests=5),
            "RESOURCE_EXHAUSTED",
        ),
        (lambda: rex.GetTimeoutError(), "DEADLINE_EXCEEDED"),
        (lambda: TimeoutError(), "DEADLINE_EXCEEDED"),
        (lambda: _task_error(ValueError("max_tokens must be >= 1")), "INVALID_ARGUMENT"),
        (lambda: _task_error(InvalidMessage("Admit: invalid message")), "INVALID_ARGUMENT"),
        (lambda: _task_error(_validation_error()), "INVALID_ARGUMENT"),
        (lambda: _task_error(MeshCredentialRefused("no token")), "UNAUTHENTICATED"),
        (lambda: _task_error(RuntimeError("bug")), "INTERNAL"),
        (lambda: _task_error(ZeroDivisionError()), "INTERNAL"),
        (lambda: RuntimeError("local bug"), "INTERNAL"),
        (lambda: ConnectionResetError(), "UNAVAILABLE"),
    ],
)
def test_status_of(make: Any, status: str) -> None:
    assert status_of(make()) == status
    assert retryable(status) == (status == "UNAVAILABLE")


class _Response:
    def __init__(self, outcome: Any) -> None:
        self.outcome = outcome

    def __await__(self) -> Any:
        async def result() -> Any:
            if isinstance(self.outcome, BaseException):
                raise self.outcome
            return self.outcome

        return result().__await__()


class _Method:
    def __init__(self, handle: _Handle, name: str) -> None:
        self.handle, self.name = handle, name

    def remote(self, message: Any = None, trace_headers: Any = None) -> Any:
        self.handle.calls.append(self.name)
        if self.name == "Endpoint":
            return _Response("")  # no own server: the handle streams
        if self.handle.stream:
            return self.handle.make_stream()
        return _Response(self.handle.outcome)


class _Handle:
    """A Serve deployment handle: unary calls answer `outcome`; streams run `make_stream`."""

    def __init__(self, outcome: Any = None, make_stream: Any = None) -> None:
        self.outcome = outcome
        self.make_stream = make_stream
        self.stream = False
        self.calls: list[str] = []

    def options(self, stream: bool = False) -> _Handle:
        clone = _Handle(self.outcome, self.make_stream)
        clone.stream, clone.calls = stream, self.calls
        return clone

    def __getattr__(self, name: str) -> _Method:
        return _Method(self, name)


@pytest.mark.parametrize(
    ("outcome", "code"),
    [
        (_task_error(ValueError("bad meta")), "INVALID_ARGUMENT"),
        (rex.ActorDiedError(), "UNAVAILABLE"),
        (_task_error(RuntimeError("bug")), "INTERNAL"),
    ],
)
def test_handle_call_failures_keep_their_status(outcome: BaseException, code: str) -> None:
    client = MeshClient()
    client._handles["scheduler"] = _Handle(outcome)

    async def run() -> str:
        try:
            await client.call("scheduler", "scheduler", "Admit", scheduler_pb2.AdmitRequest())
        except CallFailed as err:
            return err.code
        return "OK"

    assert asyncio.run(run()) == code


class _HungGenerator:
    """A Serve streaming response: the accept marker, then nothing (a hung replica)."""

    def __init__(self) -> None:
        self.cancelled = False

    def __aiter__(self) -> _HungGenerator:
        return self

    async def __anext__(self) -> Any:
        if not hasattr(self, "sent"):
            self.sent = True
            return replica_pb2.ReplicaChunk(request_id="r1")
        await asyncio.Event().wait()  # forever
        raise StopAsyncIteration

    def cancel(self) -> None:
        self.cancelled = True


def _gen() -> replica_pb2.ReplicaGenerateRequest:
    meta = common_pb2.RequestMeta(request_id="r1", max_tokens=5)
    return replica_pb2.ReplicaGenerateRequest(meta=meta, prompt="hi")


def test_a_hung_handle_stream_fails_after_the_idle_timeout_and_is_cancelled() -> None:
    hung = _HungGenerator()
    client = MeshClient(stream_idle_timeout_s=0.05)
    client._handles["replica-0"] = _Handle(make_stream=lambda: hung)

    async def run() -> tuple[int, str]:
        got = 0
        try:
            async for _ in client.stream("replica-0", "replica", "Generate", _gen()):
                got += 1
        except CallFailed as err:
            return got, f"{err.code} {err}"
        return got, "OK"

    got, failure = asyncio.run(run())
    assert got == 1  # the marker arrived; then silence
    assert failure.startswith("DEADLINE_EXCEEDED") and "no message for 0.05 s" in failure
    assert hung.cancelled


class _HungReplica:
    """A replica deployment whose Generate accepts, then hangs (its event loop alive)."""

    def __init__(self) -> None:
        self.cancelled = asyncio.Event()

    async def Generate(self, request: Any, grpc_context: Any = None) -> AsyncIterator[Any]:
        yield replica_pb2.ReplicaChunk(request_id=request.meta.request_id)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


def test_a_hung_direct_stream_fails_after_the_idle_timeout_and_the_replica_sees_the_cancel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(MESH_TOKEN_ENV, "s3cret")
    replica = _HungReplica()

    async def run() -> tuple[str, bool]:
        server, address = await start_server(replica, "127.0.0.1")

        async def resolve(app: str) -> str:
            return address

        client = MeshClient(stream_idle_timeout_s=0.2)
        client.direct = DirectReplicas(resolve)
        try:
            async for _ in client.stream("replica-0", "replica", "Generate", _gen()):
                pass
        except CallFailed as err:
            await asyncio.wait_for(replica.cancelled.wait(), 10)
            return err.code, replica.cancelled.is_set()
        finally:
            await client.close()
            await server.stop(None)
        return "OK", False

    assert asyncio.run(run()) == ("DEADLINE_EXCEEDED", True)


def test_direct_channels_carry_keepalive(monkeypatch: pytest.MonkeyPatch) -> None:
    import grpc

    options = dict(KEEPALIVE_CHANNEL_OPTIONS)
    assert options["grpc.keepalive_time_ms"] > 0 and options["grpc.keepalive_timeout_ms"] > 0
    opened: list[Any] = []
    real = grpc.aio.insecure_channel

    def spy(address: str, options: Any = None) -> Any:
        opened.append(options)
        return real(address, options=options)

    monkeypatch.setattr(grpc.aio, "insecure_channel", spy)

    async def run() -> None:
        async def resolve(app: str) -> str:
            return "127.0.0.1:1"

        d = DirectReplicas(resolve)
        await d.stub("replica-0")
        await d.close()

    asyncio.run(run())
    assert opened == [(*KEEPALIVE_CHANNEL_OPTIONS, *UNLIMITED_MESSAGES)]
