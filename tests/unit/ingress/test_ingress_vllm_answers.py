"""vLLM's own answers through the ingress: the ingress in process over a real replica's OpenAI
serving (vLLM's application on vLLM's AsyncLLM front end over a simulated engine: `sim_replica`),
the ingress counting prompts with the same tokenizer. What slomesh used to refuse itself now gets
vLLM's answer, and what vLLM refuses comes back in vLLM's words."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import ServingMesh, build_ingress
from fastapi.testclient import TestClient
from sim_replica import SimReplica

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
HELLO = [{"role": "user", "content": "hello there"}]


@pytest.fixture
def served(
    monkeypatch: pytest.MonkeyPatch, sim_replica: SimReplica
) -> Iterator[tuple[TestClient, ServingMesh]]:
    mesh = ServingMesh(sim_replica)
    models = [{"name": "llama", "max_model_len": 4096, "tokenizer": str(sim_replica.model_dir)}]
    app, _ = build_ingress(monkeypatch, mesh, models=models)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client, mesh


def _events(text: str) -> list[Any]:
    data = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    return [json.loads(d) for d in data[:-1]]


def test_chat_is_vllms_answer_and_admission_counts_its_prompt(
    served: tuple[TestClient, ServingMesh],
) -> None:
    client, mesh = served
    body = {"model": "llama", "messages": HELLO, "max_tokens": 4, "ignore_eos": True}
    response = client.post(CHAT, json=body)
    assert response.status_code == 200, response.text
    out = response.json()
    assert out["object"] == "chat.completion" and out["model"] == "llama"
    assert [c["finish_reason"] for c in out["choices"]] == ["length"]
    assert out["choices"][0]["message"]["role"] == "assistant"
    (sent,) = mesh.forwarded
    # the same rendering as vLLM's (chat template, no second BOS): the same prompt count
    assert out["usage"]["prompt_tokens"] == sent.meta.input_tokens
    assert out["usage"]["completion_tokens"] == 4


def test_n_2_is_served_two_choices(served: tuple[TestClient, ServingMesh]) -> None:
    client, _ = served
    body = {"model": "llama", "prompt": "hello there", "max_tokens": 3, "n": 2, "ignore_eos": True}
    out = client.post(COMPLETIONS, json=body).json()
    assert out["object"] == "text_completion"
    assert [c["index"] for c in out["choices"]] == [0, 1]
    assert out["usage"]["completion_tokens"] == 6


def test_a_stream_is_vllms_events_with_usage(served: tuple[TestClient, ServingMesh]) -> None:
    client, _ = served
    body = {
        "model": "llama",
        "messages": HELLO,
        "max_tokens": 3,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with client.stream("POST", CHAT, json=body) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = _events(response.read().decode())
    assert {e["object"] for e in events} == {"chat.completion.chunk"}
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    finishes = [c["finish_reason"] for e in events for c in e["choices"] if c["finish_reason"]]
    assert finishes == ["length"]
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == 3


@pytest.mark.parametrize(
    ("route", "fields", "param_or_fragment"),
    [
        (COMPLETIONS, {"prompt": "hi", "max_tokens": 100000}, "max_tokens"),
        (CHAT, {"messages": HELLO, "temperature": -1}, "temperature"),
        (CHAT, {"messages": HELLO, "model": 7}, "model"),
        (CHAT, {"messages": "not a list"}, "messages"),
    ],
)
def test_what_vllm_refuses_is_its_400(
    served: tuple[TestClient, ServingMesh],
    route: str,
    fields: dict[str, Any],
    param_or_fragment: str,
) -> None:
    client, mesh = served
    response = client.post(route, json={"model": "llama", **fields})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert set(error) >= {"message", "type", "param", "code"}
    assert error["code"] == 400 and error["type"] in ("BadRequestError", "Bad Request")
    assert param_or_fragment in (error["param"] or "") + error["message"]
    assert len(mesh.forwarded) == 1  # vLLM answered, not the ingress


def test_slomeshs_former_refusals_get_vllms_answer(
    served: tuple[TestClient, ServingMesh],
) -> None:
    client, _ = served
    body = {
        "model": "llama",
        "messages": HELLO,
        "max_tokens": "3",  # vLLM's request model reads a numeric string
        "temperature": 2.0,  # (over 2 is vLLM's own 400 too)
        "priority": 5000,
        "ignore_eos": True,
    }
    response = client.post(CHAT, json=body)
    assert response.status_code == 200, response.text
    assert response.json()["usage"]["completion_tokens"] == 3


def test_tokenize_and_detokenize_are_vllms(served: tuple[TestClient, ServingMesh]) -> None:
    client, _ = served
    chat = client.post(CHAT, json={"model": "llama", "messages": HELLO, "max_tokens": 1}).json()
    response = client.post("/tokenize", json={"model": "llama", "messages": HELLO})
    assert response.status_code == 200, response.text
    tokens = response.json()
    assert tokens["count"] == len(tokens["tokens"]) == chat["usage"]["prompt_tokens"]
    plain = client.post("/tokenize", json={"model": "llama", "prompt": "hello there"}).json()
    back = client.post("/detokenize", json={"model": "llama", "tokens": plain["tokens"]})
    assert back.status_code == 200, back.text
    assert back.json()["prompt"].endswith("hello there")
