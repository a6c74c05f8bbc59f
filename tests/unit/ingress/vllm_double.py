"""A replica's answer to the ingress's forwarded OpenAI call, as services/replica/openai_serving.py
streams it, with bodies in vLLM's shapes (a test double: FakeMesh's replica.Generate).

The chunk sequence: a chunk with `http_status` and `headers`, then the body in pieces (each with
the output tokens counted so far, all choices), then a last chunk `finished=True` with the finish
reason, output and prompt tokens. The model generates `words` words ("w1 w2 ...") per choice,
capped by the body's budget (`max_completion_tokens`/`max_tokens`, else the admitted budget):
"length" when the cap cut it, else "stop". A body that is not JSON is vLLM's 400; a model the
replica does not serve is vLLM's 404.
"""

from __future__ import annotations

import json
from typing import Any

from shared.rpc.slomesh.v1 import replica_pb2

CREATED = 1_700_000_000


def error_body(status: int, message: str, kind: str, param: str | None = None) -> dict[str, Any]:
    """vLLM's error JSON."""
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}


def _budget(route: str, body: dict[str, Any], admitted: int) -> int:
    names = ("max_completion_tokens", "max_tokens") if "chat" in route else ("max_tokens",)
    if route == "/v1/responses":
        names = ("max_output_tokens",)
    for name in names:
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value
    return admitted


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
    }


def _whole(route: str, rid: str, model: str, texts: list[str], reason: str, usage: Any) -> Any:
    if route == "/v1/chat/completions":
        choices: list[dict[str, Any]] = [
            {
                "index": i,
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": reason,
                "stop_reason": None,
            }
            for i, text in enumerate(texts)
        ]
        kind, prefix = "chat.completion", "chatcmpl-"
    elif route == "/v1/responses":
        output = [
            {
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": texts[0], "annotations": []}],
            }
        ]
        used = {
            "input_tokens": usage["prompt_tokens"],
            "output_tokens": usage["completion_tokens"],
            "total_tokens": usage["total_tokens"],
        }
        return {
            "id": f"resp_{rid}",
            "object": "response",
            "created_at": CREATED,
            "model": model,
            "status": "completed",
            "output": output,
            "usage": used,
        }
    else:
        choices = [
            {"index": i, "text": text, "logprobs": None, "finish_reason": reason}
            for i, text in enumerate(texts)
        ]
        kind, prefix = "text_completion", "cmpl-"
    return {
        "id": prefix + rid,
        "object": kind,
        "created": CREATED,
        "model": model,
        "choices": choices,
        "usage": usage,
    }


def _event(data: Any) -> bytes:
    return f"data: {json.dumps(data)}\n\n".encode()


def _chunk(route: str, rid: str, model: str, index: int, text: str | None, reason: Any) -> Any:
    chat = route == "/v1/chat/completions"
    if chat:
        delta = {"role": "assistant", "content": ""} if text is None else {"content": text}
        choice = {"index": index, "delta": delta if reason is None else {}, "logprobs": None}
    else:
        choice = {"index": index, "text": text or "", "logprobs": None}
    choice["finish_reason"] = reason
    return {
        "id": ("chatcmpl-" if chat else "cmpl-") + rid,
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": CREATED,
        "model": model,
        "choices": [choice],
    }


def vllm_answer(
    request: replica_pb2.ReplicaGenerateRequest, words: int, served: list[str]
) -> list[replica_pb2.ReplicaChunk]:
    """The replica's chunks after its accept marker (module docstring)."""
    rid = request.meta.request_id
    prompt = request.meta.input_tokens
    http = request.http

    def start(status: int, media: str) -> replica_pb2.ReplicaChunk:
        chunk = replica_pb2.ReplicaChunk(request_id=rid, http_status=status)
        chunk.headers.add(name="content-type", value=media)
        return chunk

    def last(tokens: int, reason: str) -> replica_pb2.ReplicaChunk:
        return replica_pb2.ReplicaChunk(
            request_id=rid,
            finished=True,
            finish_reason=reason,
            output_tokens=tokens,
            prompt_tokens=prompt,
        )

    def refuse(status: int, message: str, kind: str, param: str | None = None) -> list[Any]:
        body = json.dumps(error_body(status, message, kind, param)).encode()
        piece = replica_pb2.ReplicaChunk(request_id=rid, body=body)
        return [start(status, "application/json"), piece, last(0, "error")]

    try:
        body = json.loads(http.body)
    except ValueError as err:
        return refuse(400, f"JSON decode error: {err}", "BadRequestError")
    if not isinstance(body, dict):
        return refuse(400, "Input should be a valid dictionary", "BadRequestError")
    model = body.get("model", served[0])
    if model not in served:
        return refuse(404, f"The model `{model}` does not exist.", "NotFoundError", "model")
    needs = {"/v1/chat/completions": "messages", "/v1/completions": "prompt"}.get(http.path)
    if needs is not None and needs not in body:
        return refuse(400, f"{needs}: Field required", "BadRequestError", needs)
    if http.path == "/tokenize":
        out = {"count": prompt, "max_model_len": 4096, "tokens": list(range(prompt))}
        piece = replica_pb2.ReplicaChunk(request_id=rid, body=json.dumps(out).encode())
        return [start(200, "application/json"), piece, last(0, "stop")]
    n = body.get("n") if isinstance(body.get("n"), int) and body.get("n", 0) >= 1 else 1
    cap = _budget(http.path, body, request.meta.max_tokens)
    count = min(cap, words)
    reason = "length" if count == cap else "stop"
    total = n * count
    if body.get("stream") is not True:
        texts = ["".join(f"w{i} " for i in range(1, count + 1))] * n
        out = _whole(http.path, rid, str(model), texts, reason, _usage(prompt, total))
        piece = replica_pb2.ReplicaChunk(
            request_id=rid, body=json.dumps(out).encode(), output_tokens=total
        )
        return [start(200, "application/json"), piece, last(total, reason)]
    chunks = [start(200, "text/event-stream; charset=utf-8")]
    done = 0

    def piece(data: Any) -> None:
        chunks.append(replica_pb2.ReplicaChunk(request_id=rid, body=data, output_tokens=done))

    if http.path == "/v1/chat/completions":
        for index in range(n):
            piece(_event(_chunk(http.path, rid, str(model), index, None, None)))
    for i in range(1, count + 1):
        for index in range(n):
            done += 1
            piece(_event(_chunk(http.path, rid, str(model), index, f"w{i} ", None)))
    for index in range(n):
        piece(_event(_chunk(http.path, rid, str(model), index, "", reason)))
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") is True:
        tail = _chunk(http.path, rid, str(model), 0, "", None)
        tail["choices"] = []
        tail["usage"] = _usage(prompt, total)
        piece(_event(tail))
    piece(b"data: [DONE]\n\n")
    chunks.append(last(total, reason))
    return chunks
