"""Relaying a replica's stream to the caller (the ingress pipeline's second half): wait for the
replica's accept marker, admit again elsewhere when it does not come (no token sent yet), pass
the chunks on, and when the stream ends close the replica's call (the engine aborts), end the
request's root span with its attributes, record the metrics and report to the scheduler.

A mixin of Pipeline (pipeline.py), which provides the attributes and methods declared here.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

from opentelemetry import trace

from services.ingress.admission_gate import DeliveredGate
from services.ingress.args import IngressArgs
from services.ingress.core.errors import APIError, server_error
from services.ingress.observer import RequestObserver
from services.ingress.shard_router import ShardedFastPath
from shared.domain import Request
from shared.metrics.records import RequestRecord
from shared.rpc.client import CallFailed
from shared.rpc.convert import REPLICA_UNAVAILABLE, request_to_meta
from shared.rpc.slomesh.v1 import common_pb2, replica_pb2, scheduler_pb2


class StreamRelay:
    args: IngressArgs
    observer: RequestObserver
    fast: ShardedFastPath
    delivered: DeliveredGate

    def scheduler_of(self, request_id: str) -> str:
        raise NotImplementedError  # Pipeline.scheduler_of

    def _report(
        self,
        req: Request,
        replica: common_pb2.ReplicaRef,
        first: float,
        finish: float,
        tokens: int,
        reason: str,
    ) -> None:
        raise NotImplementedError  # Pipeline._report

    async def _call(
        self, service: str, method: str, message: Any, timeout_s: float | None = None
    ) -> Any:
        raise NotImplementedError  # Pipeline._call

    async def _stream(
        self,
        req: Request,
        replica: common_pb2.ReplicaRef,
        open_stream: Callable[[str], AsyncIterator[replica_pb2.ReplicaChunk]],
        readmit: Callable[[], Awaitable[Any]],
        root: trace.Span,
    ) -> AsyncIterator[replica_pb2.ReplicaChunk]:
        first = finish = 0.0
        tokens, reason = 0, "abort"
        call = open_stream(replica.application)
        accepted = False
        opening: replica_pb2.ReplicaChunk | None = None
        try:
            for attempt in range(self.args.accept_retries + 1):
                try:
                    opening = await self._accepted(call, replica.application)
                    accepted = True
                    break
                except CallFailed as err:
                    # no token was sent yet: give the seat back and admit it again. A replica
                    # that is gone (UNAVAILABLE: a direct stream fails at once) is reported as
                    # such, so the scheduler stops placing there before the re-admission, and
                    # this ingress spends no more credits on it
                    await call.aclose()  # type: ignore[attr-defined]
                    if attempt == self.args.accept_retries or time.time() > (
                        req.ttft_deadline_abs_s
                    ):
                        raise
                    gone = err.code == "UNAVAILABLE"
                    if gone:
                        self.fast.replica_failed(replica.application)
                    await self._release_now(req, replica, REPLICA_UNAVAILABLE if gone else "abort")
                    reply = await readmit()
                    if not reply.admitted:
                        raise CallFailed(replica.application, "UNAVAILABLE", reply.reason) from None
                    replica = reply.replica
                    root.set_attribute("slomesh.readmitted", attempt + 1)
                    call = open_stream(replica.application)
            async with contextlib.aclosing(_after(opening, call)) as chunks:
                async for chunk in chunks:
                    if not first and chunk.output_tokens:
                        first = time.time()
                        self.fast.first_token(req.request_id)  # its deferred prediction
                        self.delivered.first_token(req.request_id)
                    tokens = chunk.output_tokens
                    if chunk.finished:
                        reason = chunk.finish_reason
                    yield chunk
        except CallFailed as err:
            reason = "error"
            if not accepted:  # nothing reached the engine: the client may try again
                raise APIError(
                    503,
                    f"no replica accepted the request ({replica.application}: {err.code})",
                    "server_overloaded",
                    None,
                    "service_unavailable",
                    1.0,
                ) from None
            raise server_error(
                f"replica {replica.application} failed mid-request: {err.code}"
            ) from None
        finally:
            await call.aclose()  # type: ignore[attr-defined]  # cancels the replica's stream
            finish = time.time()
            self.delivered.end(req.request_id, tokens)
            self.fast.first_token(req.request_id)  # no token came: run it anyway
            root.set_attribute("slomesh.output_tokens", tokens)
            root.set_attribute("slomesh.finish_reason", reason)
            if first:
                root.set_attribute("slomesh.ttft_ms", (first - req.arrival_s) * 1e3)
            root.end()
            self.observer.finished(
                RequestRecord.from_request(
                    req, replica.application, first or None, finish if first else None, tokens
                )
            )
            self._report(req, replica, first, finish, tokens, reason)

    async def _accepted(
        self, call: AsyncIterator[replica_pb2.ReplicaChunk], application: str
    ) -> replica_pb2.ReplicaChunk | None:
        """Wait for the replica's accept, its first chunk (empty, or the response's first
        message: returned, to be passed on): a replica that is gone (its node lost, its actor
        not yet replaced) fails the request within replica_accept_timeout_s with a clear error
        instead of holding the stream open."""
        try:
            async with asyncio.timeout(self.args.replica_accept_timeout_s):
                marker = await anext(call)
        except TimeoutError:
            raise CallFailed(application, "DEADLINE_EXCEEDED", "no accept") from None
        except StopAsyncIteration:
            raise CallFailed(application, "UNAVAILABLE", "stream ended at once") from None
        carries = marker.output_tokens or marker.finished or marker.text or marker.body
        return marker if carries or marker.http_status else None

    async def _release_now(
        self, req: Request, replica: common_pb2.ReplicaRef, reason: str = "abort"
    ) -> None:
        """Report an abort and wait for it (before the same request is admitted again)."""
        await self.fast.settled(req.request_id)  # a fast-path placement is known first
        report = scheduler_pb2.CompletionReport(
            meta=request_to_meta(req), replica=replica, finish_reason=reason
        )
        with contextlib.suppress(APIError, CallFailed):
            await self._call(self.scheduler_of(req.request_id), "Report", report)


async def _after(
    opening: replica_pb2.ReplicaChunk | None, call: AsyncIterator[replica_pb2.ReplicaChunk]
) -> AsyncGenerator[replica_pb2.ReplicaChunk, None]:
    """The stream's chunks, the accept first when it carried the response's first message."""
    if opening is not None:
        yield opening
    async for chunk in call:
        yield chunk
