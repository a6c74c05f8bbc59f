"""Hostile input through the ingress's FastAPI app in process: every answer is
OpenAI's error JSON naming the rule, never a plain-text 500; the JSON limits, the Unicode check
and the tokenizer-less prompt estimate, rule by rule."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from conftest import FakeMesh, build_ingress
from fastapi.testclient import TestClient

from services.ingress.core.errors import APIError
from services.ingress.core.json_body import decode_json, nesting_depth
from services.ingress.core.request_meta import estimate_tokens
from shared.rpc.slomesh.v1 import replica_pb2

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
MB = 1_000_000


def chat_body(content: str = "hello there", **fields: Any) -> str:
    return json.dumps(
        {"model": "llama", "messages": [{"role": "user", "content": content}], **fields}
    )


def assert_openai_error(response: Any, status: int) -> dict[str, Any]:
    """The response is `status` with exactly OpenAI's error body; returns its `error`."""
    assert response.status_code == status, response.text[:500]
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}
    error: dict[str, Any] = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["type"], str) and error["type"]
    return error


HTTP_CASES = [
    # (name, path, raw body, status, param, code, message fragment)
    ("lone-surrogate-escape", CHAT, chat_body("\ud800"), 400, "messages[0].content",
     "invalid_unicode", "U+D800 at character 0 is a lone surrogate"),
    ("lone-surrogate-mid-prompt", COMPLETIONS,
     '{"model": "llama", "prompt": "ok \\udfff"}', 400, "prompt", "invalid_unicode", "U+DFFF"),
    ("lone-surrogate-in-key", CHAT, '{"model": "llama", "\\ud800": 1, "messages": []}', 400,
     None, "invalid_unicode", "object key must be valid Unicode"),
    ("lone-surrogate-in-model", CHAT, chat_body(model="\udc00"), 400, "model",
     "invalid_unicode", "valid Unicode"),
    ("invalid-utf8-byte", CHAT,
     b'{"model": "llama", "messages": [{"role": "user", "content": "a\xc3("}]}', 400,
     "messages[0].content", "invalid_unicode", "invalid UTF-8 byte"),
    ("deep-array-5000", CHAT, "[" * 5000 + "]" * 5000, 400, None, "json_too_deep",
     "nested 5000 levels deep, over the limit of 64 (max_json_depth)"),
    ("deep-object-3000", CHAT, '{"a":' * 3000 + "1" + "}" * 3000, 400, None, "json_too_deep",
     "nested 3000 levels deep"),
    ("deep-unterminated", CHAT, "[" * 100_000, 400, None, "json_too_deep", "max_json_depth"),
    ("deep-in-ignored-field", CHAT,
     '{"model": "llama", "tools": ' + "[" * 65 + "]" * 65 + "}", 400, None, "json_too_deep",
     "nested 66 levels"),
    ("oversize-body", COMPLETIONS, json.dumps({"model": "llama", "prompt": "x" * 5 * MB}), 413,
     None, "request_too_large", "over the limit of 4194304 bytes (max_body_bytes)"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("path", "raw", "status", "param", "code", "fragment"),
    [pytest.param(*case[1:], id=case[0]) for case in HTTP_CASES],
)
def test_ingress_hostile_body_is_openai_error(
    client: TestClient,
    path: str,
    raw: str | bytes,
    status: int,
    param: str | None,
    code: str | None,
    fragment: str,
) -> None:
    response = client.post(path, content=raw, headers={"content-type": "application/json"})
    error = assert_openai_error(response, status)
    assert (error["param"], error["code"]) == (param, code)
    assert fragment in error["message"]
    if param is not None and code != "context_length_exceeded":  # OpenAI's own wording there
        assert error["message"].startswith(param)


def test_ingress_brackets_inside_strings_do_not_count_as_depth(client: TestClient) -> None:
    response = client.post(CHAT, content=chat_body("[{" * 2000), headers={})
    assert response.status_code == 200, response.text
    nested_ok = '{"model": "llama", "tools": ' + "[" * 63 + "]" * 63
    nested_ok += ', "messages": [{"role": "user", "content": "hi"}]}'
    assert client.post(CHAT, content=nested_ok).status_code == 200  # 64 levels: at the limit


def test_ingress_oversize_body_streamed_without_content_length(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"model": "llama", "prompt": "'
        for _ in range(5):
            yield b"x" * MB
        yield b'"}'

    response = client.post(COMPLETIONS, content=chunks())
    error = assert_openai_error(response, 413)
    assert error["code"] == "request_too_large"
    assert "more is over the limit" in error["message"]


def test_ingress_limits_are_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    admission = {"max_body_bytes": 2048, "max_json_depth": 4}
    app, _ = build_ingress(monkeypatch, FakeMesh(), admission=admission)
    client = TestClient(app, raise_server_exceptions=False)
    assert client.post(CHAT, content=chat_body()).status_code == 200  # depth 3
    error = assert_openai_error(client.post(CHAT, content=chat_body("x" * 3000)), 413)
    assert "limit of 2048 bytes" in error["message"]
    deep = chat_body(tools=[[[{}]]])  # depth 5
    assert (
        "limit of 4 (max_json_depth)"
        in assert_openai_error(client.post(CHAT, content=deep), 400)["message"]
    )


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("", 0),
        ("1", 0),
        ("[]", 1),
        ('{"a": [1, {"b": []}]}', 4),
        ('"[[[["', 0),
        ('{"a": "]]]{{{", "b": ["\\"[["]}', 2),
        ('["\\\\", ["x"]]', 2),  # an escaped backslash does not escape the closing quote
        ("[" * 5000 + "]" * 5000, 5000),
        ('["unterminated [[[[', 1),
        ("]]]", 0),
    ],
    ids=lambda value: value[:24] if isinstance(value, str) else str(value),
)
def test_ingress_nesting_depth(text: str, depth: int) -> None:
    assert nesting_depth(text) == depth


@pytest.mark.parametrize(
    "text",
    [
        '"' + '\\"' * 500_000,  # one unterminated string of escaped quotes
        '"a' * 500_000,  # quotes that pair up
        "[]" * 1_000_000,  # shallow but many brackets
    ],
    ids=["unterminated-escaped-quotes", "many-strings", "many-shallow-brackets"],
)
def test_ingress_depth_check_rejects_pathological_bodies(text: str) -> None:
    # these bodies made a quadratic depth scan hang; the check must end with a clear error
    with pytest.raises(APIError):
        decode_json(text, max_body_bytes=4 * MB, max_json_depth=64)


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 1),
        ("hi", 2),  # words: ceil(1.3 x 1)
        ("hello world", 3),  # words: ceil(1.3 x 2)
        ("The quick brown fox jumps over the lazy dog.", 12),  # words: ceil(1.3 x 9)
        ("x" * MB, 250_000),  # one "word": bytes / 4
        ("a,b;" * 2500, 2500),  # punctuation-joined "word" of 10,000 bytes
        ("你好" * 1000, 1500),  # 6,000 UTF-8 bytes, no spaces
        ("word " * 1000, 1300),  # words dominate
    ],
    ids=lambda value: value[:24] if isinstance(value, str) else str(value),
)
def test_ingress_prompt_estimate_without_tokenizer(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


@pytest.mark.parametrize(
    ("path", "body", "input_tokens", "max_tokens"),
    [
        # no tokenizer: counted by bytes (4,000 bytes, one "word"); vLLM's default budget
        (COMPLETIONS, {"prompt": "x" * 4000}, 1000, 4096 - 1000),
        (CHAT, {"messages": [{"role": "user", "content": "x" * 4000}], "max_tokens": 7}, None, 7),
        # over the context: admission plans on what fits; vLLM answers its own 400 for it
        (COMPLETIONS, {"prompt": "x" * MB}, 4095, 1),
        (CHAT, {"messages": [{"role": "user", "content": "y" * MB}]}, 4095, 1),
    ],
    ids=["bytes", "chat-bytes", "megabyte-prompt", "megabyte-chat"],
)
def test_ingress_counts_no_space_prompts_by_bytes_and_forwards_them(
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    body: dict[str, Any],
    input_tokens: int | None,
    max_tokens: int,
) -> None:
    mesh = FakeMesh()
    app, _ = build_ingress(monkeypatch, mesh)
    response = TestClient(app).post(path, json={"model": "llama", **body})
    assert response.status_code == 200, response.text
    (sent,) = mesh.forwarded
    if input_tokens is not None:
        assert sent.meta.input_tokens == input_tokens
    else:  # the messages' JSON text counts: more than the content alone
        assert sent.meta.input_tokens > 1000
    assert sent.meta.max_tokens == max_tokens
    assert json.loads(sent.http.body)[(path == CHAT and "messages") or "prompt"] == body.get(
        "messages", body.get("prompt")
    )


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(
            '{"model": "llama", "prompt": "x", "max_tokens": ' + "9" * 5000 + "}",
            id="integer-over-4300-digits",
        ),
        pytest.param(
            '{"model": "llama",',
            id="truncated",
        ),
        pytest.param("[1, 2]", id="json-array"),
        pytest.param("not json", id="not-json"),
    ],
)
def test_ingress_forwards_a_body_it_cannot_read_for_vllm_to_answer(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    """Not JSON (or JSON Python will not read): vLLM answers its own 400, so the body must reach
    it as the client sent it."""
    mesh = FakeMesh()
    app, _ = build_ingress(monkeypatch, mesh)
    response = TestClient(app).post(COMPLETIONS, content=raw)
    assert_openai_error(response, 400)
    (sent,) = mesh.forwarded
    assert sent.http.body == raw.encode()


class Boom(Exception):
    """An exception no handler knows."""


class MidStreamCrash(FakeMesh):
    """A replica whose stream fails after its response started (one event sent)."""

    async def stream(
        self, application: str, kind: str, method: str, message: Any, **kw: Any
    ) -> AsyncIterator[Any]:
        rid = message.meta.request_id
        start = replica_pb2.ReplicaChunk(request_id=rid, http_status=200)
        start.headers.add(name="content-type", value="text/event-stream; charset=utf-8")
        yield replica_pb2.ReplicaChunk(request_id=rid)
        yield start
        yield replica_pb2.ReplicaChunk(request_id=rid, body=b'data: {"choices": []}\n\n')
        raise Boom("secret \ud800 detail")


@pytest.mark.parametrize(
    ("mesh", "stream"),
    [
        (FakeMesh(crash=Boom("secret \ud800 detail")), False),
        (FakeMesh(crash=Boom("secret \ud800 detail")), True),  # before vLLM's response starts
        (MidStreamCrash(), True),
    ],
    ids=["whole", "stream-before-start", "mid-stream"],
)
def test_ingress_unknown_exception_in_replica_stream(
    monkeypatch: pytest.MonkeyPatch, mesh: FakeMesh, stream: bool
) -> None:
    app, _ = build_ingress(monkeypatch, mesh)
    client = TestClient(app, raise_server_exceptions=False)
    response = client.post(CHAT, content=chat_body(stream=stream))
    if not isinstance(mesh, MidStreamCrash):
        error = assert_openai_error(response, 500)
    else:  # the 200 has gone out: the error is the last event before [DONE]
        assert response.status_code == 200
        events = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
        assert events[0] == '{"choices": []}' and events[-1] == "[DONE]"
        error = json.loads(events[-2])["error"]
    # in a stream, vLLM's error event shape (its code is the status)
    assert error["code"] == (500 if isinstance(mesh, MidStreamCrash) else "internal_error")
    assert error["type"] == "server_error"
    assert error["param"] is None
    assert "Boom" in error["message"] and "secret" not in error["message"]


def _raise(*args: Any, **kwargs: Any) -> Any:
    raise Boom("unexpected")


@pytest.mark.parametrize(
    ("method", "path", "patch"),
    [
        ("POST", CHAT, "pipeline.admit"),  # in a completion handler
        ("POST", COMPLETIONS, "pipeline.gate.check"),  # inside admission
        ("GET", "/v1/models", "args"),  # a route without its own handler: the app's catch-all
    ],
)
def test_ingress_unknown_exception_is_openai_500(
    monkeypatch: pytest.MonkeyPatch, method: str, path: str, patch: str
) -> None:
    app, instance = build_ingress(monkeypatch, FakeMesh())
    owner_name, _, attr = patch.rpartition(".")
    owner = instance
    for name in owner_name.split(".") if owner_name else ():
        owner = getattr(owner, name)
    monkeypatch.setattr(owner, attr, _raise if owner_name else None)
    client = TestClient(app, raise_server_exceptions=False)
    body = json.dumps({"model": "llama", "prompt": "hi"}) if path == COMPLETIONS else chat_body()
    response = client.request(method, path, content=body if method == "POST" else None)
    error = assert_openai_error(response, 500)
    assert (error["type"], error["code"]) == ("server_error", "internal_error")


@pytest.mark.parametrize(
    ("method", "path", "status", "fragment"),
    [
        ("POST", "/v1/embeddings", 404, "unknown path /v1/embeddings"),
        ("GET", CHAT, 405, "method GET is not allowed"),
        ("DELETE", "/v1/models", 405, "method DELETE"),
    ],
)
def test_ingress_framework_errors_are_openai_shaped(
    client: TestClient, method: str, path: str, status: int, fragment: str
) -> None:
    error = assert_openai_error(client.request(method, path), status)
    assert fragment in error["message"]


@pytest.mark.parametrize(
    ("mesh", "status", "code", "retry_after"),
    [
        (FakeMesh(admit=False, retry_after_s=2.5), 429, "rate_limit_exceeded", "3"),
        (FakeMesh(admit=False), 503, "server_overloaded", "1"),
        (FakeMesh(down=("scheduler",)), 503, "service_unavailable", "1"),
    ],
)
def test_ingress_admission_errors_are_openai_shaped(
    monkeypatch: pytest.MonkeyPatch, mesh: FakeMesh, status: int, code: str, retry_after: str
) -> None:
    app, _ = build_ingress(monkeypatch, mesh)
    response = TestClient(app, raise_server_exceptions=False).post(CHAT, content=chat_body())
    assert assert_openai_error(response, status)["code"] == code
    assert response.headers["retry-after"] == retry_after


def test_ingress_predictor_down_still_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    mesh = FakeMesh(down=("predictor",))
    app, _ = build_ingress(monkeypatch, mesh)
    response = TestClient(app).post(CHAT, content=chat_body(max_tokens=2))
    assert response.status_code == 200
    assert response.json()["choices"][0]["finish_reason"] == "length"
    assert ("replica-0", "Generate") in mesh.calls


def test_ingress_openapi_documents_bodies_and_errors(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    schemas = doc["components"]["schemas"]
    for path, model in ((COMPLETIONS, "CompletionRequest"), (CHAT, "ChatCompletionRequest")):
        operation = doc["paths"][path]["post"]
        ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        assert ref == f"#/components/schemas/{model}"
        assert operation["requestBody"]["required"] is True
        for status in ("400", "401", "404", "413", "429", "500", "503"):
            error_schema = operation["responses"][status]["content"]["application/json"]
            assert error_schema["schema"]["$ref"] == "#/components/schemas/ErrorResponse"
        headers = {p["name"] for p in operation["parameters"] if p["in"] == "header"}
        assert headers == {"x-slo-ttft-ms", "x-slo-tpot-ms"}
    refs = {m.group(1) for m in _refs(json.dumps(doc))}
    assert refs <= set(schemas), refs - set(schemas)  # every $ref resolves
    assert set(schemas["ChatCompletionRequest"]["required"]) == {"model", "messages"}
    assert schemas["ErrorDetail"]["required"] == ["message", "type", "param", "code"]


def _refs(text: str) -> Iterator[Any]:
    import re

    return re.finditer(r'"\$ref": "#/components/schemas/([^"]+)"', text)
