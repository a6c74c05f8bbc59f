"""vLLM's answer, relayed: the replica's response (status, headers, body pieces from vLLM's own
OpenAI application) becomes the client's HTTP response unchanged, or the gRPC `Ingress`
stream's chunks.

A streamed response (server-sent events) is passed on piece by piece as the replica sends it; any
other response is gathered and sent whole. A replica that fails after the response started ends
a stream with an error event in vLLM's shape (`data: {"error": ...}`) and `data: [DONE]`.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import Response, StreamingResponse

from services.ingress.core.errors import APIError, internal_error
from services.ingress.pipeline import Admitted
from shared.rpc.slomesh.v1 import ingress_pb2, replica_pb2

REQUEST_ID_HEADER = "x-slomesh-request-id"
"""Response header naming slomesh's id of the request (its traces' `slomesh.request_id`, the id
replicas report), beside vLLM's own response id."""
_DROPPED_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "vary"})


async def _start(
    chunks: AsyncIterator[replica_pb2.ReplicaChunk],
) -> tuple[int, dict[str, str], list[bytes]]:
    """Read up to the response's start: its status, headers and any body that came with it."""
    early: list[bytes] = []
    async for chunk in chunks:
        if chunk.body:
            early.append(chunk.body)
        if chunk.http_status:
            headers = {
                h.name: h.value for h in chunk.headers if h.name.lower() not in _DROPPED_HEADERS
            }
            return int(chunk.http_status), headers, early
        if chunk.finished:
            break
    raise APIError(502, "the replica ended the call without a response", "server_error")


async def http_response(admitted: Admitted) -> Response:
    """The client's HTTP response for an admitted request (module docstring)."""
    chunks = admitted.chunks
    try:
        status, headers, early = await _start(chunks)
    except BaseException:
        await chunks.aclose()  # type: ignore[attr-defined]  # ends the replica call
        raise
    media = headers.pop("content-type", "application/json")
    headers.update(admitted.headers)
    headers[REQUEST_ID_HEADER] = admitted.request.request_id
    if media.startswith("text/event-stream"):
        return StreamingResponse(
            _events(admitted, early), status_code=status, headers=headers, media_type=media
        )
    try:
        parts = early + [c.body async for c in chunks if c.body]
    except BaseException:
        await chunks.aclose()  # type: ignore[attr-defined]
        raise
    return Response(b"".join(parts), status_code=status, headers=headers, media_type=media)


async def collect(admitted: Admitted) -> tuple[int, bytes]:
    """The whole response of a request sent without `stream` (a batch line): status and body."""
    try:
        status, _, early = await _start(admitted.chunks)
        parts = early + [c.body async for c in admitted.chunks if c.body]
    finally:
        await admitted.chunks.aclose()  # type: ignore[attr-defined]
    return status, b"".join(parts)


async def _events(admitted: Admitted, early: list[bytes]) -> AsyncIterator[bytes]:
    for part in early:
        yield part
    try:
        async for chunk in admitted.chunks:
            if chunk.body:
                yield chunk.body
    except APIError as err:
        yield _error_event(err)
    except Exception as exc:
        yield _error_event(internal_error(exc))


def _error_event(err: APIError) -> bytes:
    """An error after the stream started, as vLLM's streaming handlers send one."""
    info = {"message": err.message, "type": err.type, "param": err.param, "code": err.status}
    body = {"error": info}
    return f"data: {json.dumps(body)}\n\ndata: [DONE]\n\n".encode()


async def grpc_chunks(admitted: Admitted) -> AsyncIterator[ingress_pb2.GenerateChunk]:
    """The gRPC stream of a request sent to vLLM with `stream: true`: each event's text (choice
    0's `delta.content` or `text`), output tokens so far, and the finish on the last chunk."""
    rid = admitted.request.request_id
    prompt_tokens = admitted.request.input_tokens
    status, headers, early = await _start(admitted.chunks)
    if not headers.get("content-type", "").startswith("text/event-stream"):
        # vLLM refused the request before streaming: its JSON error, with its status
        body = b"".join(early + [c.body async for c in admitted.chunks if c.body])
        raise _json_error(status, body)
    buffer = b"".join(early)
    reason = ""
    tokens = 0

    async for chunk in admitted.chunks:
        buffer += chunk.body
        tokens = chunk.output_tokens or tokens
        if chunk.prompt_tokens:
            prompt_tokens = chunk.prompt_tokens
        events, buffer = _split_events(buffer)
        for event in events:
            if status >= 400 or "error" in event:
                error = event.get("error", event)
                raise APIError(status or 500, str(error.get("message", error)), "server_error")
            for choice in event.get("choices", ()):
                if choice.get("index", 0) != 0:
                    continue
                text = (choice.get("delta") or {}).get("content") or choice.get("text") or ""
                reason = choice.get("finish_reason") or reason
                if text:
                    yield ingress_pb2.GenerateChunk(
                        request_id=rid, text=text, output_tokens=tokens, prompt_tokens=prompt_tokens
                    )
        if chunk.finished:
            break
    yield ingress_pb2.GenerateChunk(
        request_id=rid,
        output_tokens=tokens,
        prompt_tokens=prompt_tokens,
        finished=True,
        finish_reason=reason or "stop",
    )


def _json_error(status: int, body: bytes) -> APIError:
    try:
        error = json.loads(body).get("error") or {}
    except (ValueError, AttributeError):
        error = {}
    message = str(error.get("message") or body.decode("utf-8", "replace")[:500])
    kind = str(error.get("type") or "server_error")
    return APIError(status if status >= 400 else 502, message, kind, error.get("param"))


def _split_events(buffer: bytes) -> tuple[list[dict[str, Any]], bytes]:
    """Whole server-sent events of `buffer` (their JSON data) and what is left after them."""
    out: list[dict[str, Any]] = []
    while b"\n\n" in buffer:
        raw, buffer = buffer.split(b"\n\n", 1)
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data and data != "[DONE]":
            out.append(json.loads(data))
    return out, buffer


def model_card(
    name: str, root: str, max_model_len: int | None, parent: str | None = None
) -> dict[str, Any]:
    """One `/v1/models` entry in vLLM's shape (a LoRA adapter's: its base as `parent`, no
    `max_model_len`)."""
    now = int(time.time())
    return {
        "id": name,
        "object": "model",
        "created": now,
        "owned_by": "vllm",
        "root": root,
        "parent": parent,
        "max_model_len": max_model_len,
        "permission": [
            {
                "id": f"modelperm-{name}",
                "object": "model_permission",
                "created": now,
                "allow_create_engine": False,
                "allow_sampling": True,
                "allow_logprobs": True,
                "allow_search_indices": False,
                "allow_view": True,
                "allow_fine_tuning": False,
                "organization": "*",
                "group": None,
                "is_blocking": False,
            }
        ],
    }
