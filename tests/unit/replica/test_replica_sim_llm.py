"""A simulated replica's OpenAI serving (sim_llm.py via openai_serving.simulated_serving): vLLM's
own application on vLLM's AsyncLLM front end over the simulated engine answers as vLLM does
(chat and completion shapes, n, logprobs, length, 404), and the replica's chunk sequence."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.domain import SLO, Request
from shared.rpc.slomesh.v1 import replica_pb2
from tests.unit.ingress.sim_replica import SimReplica


@pytest.fixture(scope="module")
def replica(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimReplica]:
    sim = SimReplica.start(Path(tmp_path_factory.mktemp("tiny")) / "tiny-llama", "llama", 4096)
    try:
        yield sim
    finally:
        sim.stop()


def _serve(replica: SimReplica, path: str, body: dict[str, Any], rid: str) -> list[Any]:
    http = replica_pb2.HttpCall(method="POST", path=path, body=json.dumps(body).encode())
    http.headers.add(name="content-type", value="application/json")
    request = Request(rid, "llama", 8, 16, 0.0, SLO(3600.0))

    async def run() -> list[Any]:
        return [c async for c in replica.serve(request, http)]

    return asyncio.run(run())


def _answer(chunks: list[Any]) -> tuple[int, Any, Any]:
    status = next(c.http_status for c in chunks if c.http_status)
    body = b"".join(c.body for c in chunks)
    return status, json.loads(body), chunks[-1]


HELLO = [{"role": "user", "content": "hello there"}]


@pytest.mark.parametrize(
    ("path", "body", "kind", "choices", "tokens"),
    [
        ("/v1/chat/completions", {"messages": HELLO, "max_tokens": 4}, "chat.completion", 1, 4),
        ("/v1/completions", {"prompt": "hello", "max_tokens": 5}, "text_completion", 1, 5),
        ("/v1/completions", {"prompt": "hello", "max_tokens": 3, "n": 2}, "text_completion", 2, 6),
    ],
)
def test_answers_in_vllms_shape_with_the_replicas_chunks(
    replica: SimReplica, path: str, body: dict[str, Any], kind: str, choices: int, tokens: int
) -> None:
    chunks = _serve(replica, path, {"model": "llama", "ignore_eos": True, **body}, f"r-{kind}")
    status, out, last = _answer(chunks)
    assert status == 200 and out["object"] == kind
    assert [c["finish_reason"] for c in out["choices"]] == ["length"] * choices
    assert out["usage"]["completion_tokens"] == tokens
    # a whole (not streamed) answer is one message: its status, body and the finish
    assert len(chunks) == 1 and chunks[0].http_status == 200
    assert (last.finished, last.finish_reason, last.output_tokens) == (True, "length", tokens)
    assert last.prompt_tokens == out["usage"]["prompt_tokens"]


def test_logprobs_have_vllms_shape(replica: SimReplica) -> None:
    body = {"model": "llama", "messages": HELLO, "max_tokens": 3, "ignore_eos": True}
    _, out, _ = _answer(
        _serve(replica, "/v1/chat/completions", {**body, "logprobs": True, "top_logprobs": 2}, "lp")
    )
    content = out["choices"][0]["logprobs"]["content"]
    assert len(content) == 3
    assert all(len(t["top_logprobs"]) == 2 and t["logprob"] <= 0 for t in content)


def test_unknown_model_is_vllms_404(replica: SimReplica) -> None:
    status, out, last = _answer(
        _serve(replica, "/v1/completions", {"model": "nope", "prompt": "x"}, "404")
    )
    assert status == 404 and out["error"]["type"] == "NotFoundError"
    assert "nope" in out["error"]["message"]
    assert (last.finished, last.finish_reason, last.output_tokens) == (True, "error", 0)


def test_the_in_process_app_runs_without_socket_middleware(replica: SimReplica) -> None:
    """vLLM's application on the replica keeps its own middleware but not what serves a
    socket's clients (CORS, the Prometheus HTTP instrumentator): nothing reaches it over a
    socket."""
    from services.replica.vllm.openai_app import SOCKET_MIDDLEWARE

    names = {getattr(m.cls, "__name__", "") for m in replica.serving.app.user_middleware}
    assert names and not names & SOCKET_MIDDLEWARE, names


def test_dropping_socket_middleware_keeps_the_rest_even_from_a_built_stack() -> None:
    from fastapi import FastAPI
    from fastapi.testclient import TestClient
    from starlette.middleware.cors import CORSMiddleware
    from starlette.middleware.gzip import GZipMiddleware

    from services.replica.vllm.openai_app import drop_socket_middleware

    app = FastAPI()
    app.add_middleware(CORSMiddleware, allow_origins=["*"])
    app.add_middleware(GZipMiddleware)

    @app.get("/x")
    def x() -> dict[str, int]:
        return {"x": 1}

    app.middleware_stack = app.build_middleware_stack()  # as vLLM's build leaves it
    assert (
        TestClient(app)
        .get("/x", headers={"origin": "http://a"})
        .headers["access-control-allow-origin"]
        == "*"
    )
    assert drop_socket_middleware(app) == ["CORSMiddleware"]
    assert [m.cls for m in app.user_middleware] == [GZipMiddleware]
    response = TestClient(app).get("/x", headers={"origin": "http://a"})
    assert response.json() == {"x": 1} and "access-control-allow-origin" not in response.headers
