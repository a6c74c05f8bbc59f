"""Slice-level serving at the ingress: one client stream over several replica slices.

With a batching policy (SCLS DP batching, UELLM SLO-ODBS) the scheduler's placement carries a
slice budget (`AdmitReply.slice_tokens`): the replica generates at most that many tokens and, when
the request is not done, ends its stream with finish_reason "slice" and the context to resume
from (prompt + output token ids, from vLLM). The ingress then hands the request back to the
scheduler (`Admit` with `resume_output_tokens`: it rejoins the batch pool with its arrival and
deadlines) and continues on whichever replica the next batch is placed on, with that context.
The client sees one uninterrupted stream: the slice's end is not passed on, the next replica's
accept marker neither, and output counts are cumulative across slices.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from shared.rpc.client import CallFailed, MeshClient
from shared.rpc.slomesh.v1 import replica_pb2, scheduler_pb2

AdmitCall = Callable[[scheduler_pb2.AdmitRequest], Awaitable[Any]]


def slice_streams(
    client: MeshClient,
    generate: replica_pb2.ReplicaGenerateRequest,
    headers: dict[str, str],
    slice_tokens: int,
    admit_call: AdmitCall,
    admit: scheduler_pb2.AdmitRequest,
) -> Callable[[str], AsyncIterator[replica_pb2.ReplicaChunk]]:
    """`open_stream(application)` for the pipeline: a plain replica stream when `slice_tokens`
    is 0, else a stream that follows the request from slice to slice (module docstring)."""

    def plain(app: str, message: replica_pb2.ReplicaGenerateRequest) -> Any:
        return client.stream(app, "replica", "Generate", message, trace_headers=headers)

    if not slice_tokens:
        return lambda app: plain(app, generate)

    async def sliced(app: str) -> AsyncIterator[replica_pb2.ReplicaChunk]:
        message = replica_pb2.ReplicaGenerateRequest()
        message.CopyFrom(generate)
        message.slice_tokens = slice_tokens
        call = plain(app, message)
        try:
            while True:
                end: replica_pb2.ReplicaChunk | None = None
                async for chunk in call:
                    if chunk.finished and chunk.finish_reason == "slice":
                        end = chunk
                        break
                    yield chunk
                if end is None:
                    return
                if end.text:  # the slice's last tokens, as an ordinary chunk
                    yield replica_pb2.ReplicaChunk(
                        request_id=end.request_id,
                        text=end.text,
                        output_tokens=end.output_tokens,
                        time_unix_s=end.time_unix_s,
                    )
                await call.aclose()
                resume = scheduler_pb2.AdmitRequest()
                resume.CopyFrom(admit)
                resume.resume_output_tokens = end.output_tokens
                reply = await admit_call(resume)
                if not reply.admitted:
                    raise CallFailed(app, "UNAVAILABLE", f"slice not resumed: {reply.reason}")
                app = reply.replica.application
                message = next_slice(generate, end, reply.slice_tokens)
                call = plain(app, message)
                marker = await anext(call)  # the next replica's accept marker
                if marker.output_tokens or marker.text or marker.finished:
                    yield marker
                    if marker.finished:
                        return
        finally:
            await call.aclose()

    return sliced


def next_slice(
    generate: replica_pb2.ReplicaGenerateRequest,
    end: replica_pb2.ReplicaChunk,
    slice_tokens: int,
) -> replica_pb2.ReplicaGenerateRequest:
    """The Generate call of the slice after `end` (a chunk finished with reason "slice"): the
    same request, continuing after end.output_tokens from end's context ids (vLLM) or, from an
    engine without ids (simulated), from the prompt and the count."""
    message = replica_pb2.ReplicaGenerateRequest()
    message.CopyFrom(generate)
    message.slice_tokens = slice_tokens
    message.prior_output_tokens = end.output_tokens
    message.context_token_ids.extend(end.context_token_ids)
    return message
