"""`slomesh up`'s readiness wait (slomesh/launch/readiness.py) against a scripted scheduler Health
and OpenAI endpoint: it waits until the scheduler counts every replica ready, then sends
one-token completions per start model until each succeeds, waits as the mesh's Retry-After
says, stops at once on an answer waiting cannot change, and names the model and the mesh's last
answer when the deadline passes."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import yaml

from slomesh.launch.mesh import DEPLOY_DIR
from slomesh.launch.readiness import (
    MeshNotReady,
    ingress_models,
    probe_key,
    replicas_by_start_model,
    start_models,
    wait_for_replicas,
    wait_until_ready,
    wait_until_serving,
)
from slomesh.stacks import load_stack
from slomesh.stacks.live import apply_stack

BASE = "http://127.0.0.1:8100/v1"
OK = {"choices": [{"text": "x", "finish_reason": "length"}]}


def _error(status: int, message: str, retry_after: str | None = "1") -> httpx.Response:
    headers = {"retry-after": retry_after} if retry_after else {}
    body = {"error": {"message": message, "type": "server_error", "param": None, "code": None}}
    return httpx.Response(status, json=body, headers=headers)


class Script:
    """Answers per model in turn (the last one repeats); records every request."""

    def __init__(self, answers: dict[str, list[Callable[[], httpx.Response]]]) -> None:
        self.answers = answers
        self.seen: list[dict[str, Any]] = []
        self.auth: list[str | None] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/completions"
        body = json.loads(request.content)
        self.seen.append(body)
        self.auth.append(request.headers.get("authorization"))
        queue = self.answers[body["model"]]
        return (queue.pop(0) if len(queue) > 1 else queue[0])()


def _run(script: Script, models: list[str], **kwargs: Any) -> tuple[dict[str, float], list[float]]:
    slept: list[float] = []
    client = httpx.Client(transport=httpx.MockTransport(script))
    took = wait_until_serving(BASE, models, client=client, sleep=slept.append, **kwargs)
    return took, slept


def test_each_model_is_sent_one_token_until_it_succeeds_waiting_as_told() -> None:
    script = Script(
        {
            "a": [lambda: _error(503, "no healthy replica serves model 'a'", "2"),
                  lambda: _error(500, "replica replica-0 failed mid-request", None),
                  lambda: httpx.Response(200, json=OK)],
            "b": [lambda: httpx.Response(200, json=OK)],
        }
    )  # fmt: skip
    took, slept = _run(script, ["a", "b"])
    assert set(took) == {"a", "b"}
    assert [s["model"] for s in script.seen] == ["a", "a", "a", "b"]
    assert all(s["max_tokens"] == 1 for s in script.seen)
    assert slept == [2.0, 0.5]  # Retry-After, then the default pause (no header)
    assert script.auth == [None] * 4


def test_connection_refused_is_waited_out() -> None:
    calls = {"n": 0}

    def flaky(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] < 3:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, json=OK)

    client = httpx.Client(transport=httpx.MockTransport(flaky))
    took = wait_until_serving(BASE, ["a"], client=client, sleep=lambda s: None)
    assert list(took) == ["a"] and calls["n"] == 3


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_an_answer_waiting_cannot_change_ends_the_wait_at_once(status: int) -> None:
    script = Script({"a": [lambda: _error(status, "the model 'a' does not exist", None)]})
    with pytest.raises(MeshNotReady) as err:
        _run(script, ["a"])
    assert len(script.seen) == 1
    assert f"model 'a' refused its first completion at {BASE}: {status}" in str(err.value)


def test_the_deadline_names_the_model_and_the_last_answer() -> None:
    script = Script(
        {
            "a": [lambda: httpx.Response(200, json=OK)],
            "b": [lambda: _error(500, "replica replica-3 failed mid-request: UNAUTHENTICATED")],
        }
    )
    clock = {"t": 0.0}

    def sleep(s: float) -> None:
        clock["t"] += s

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("slomesh.launch.readiness.time.monotonic", lambda: clock["t"])
        with pytest.raises(MeshNotReady) as err:
            wait_until_serving(
                BASE,
                ["a", "b"],
                timeout_s=10,
                client=httpx.Client(transport=httpx.MockTransport(script)),
                sleep=sleep,
            )
    message = str(err.value)
    assert "model 'b' served no completion" in message and "within 10 s" in message
    assert "replica replica-3 failed mid-request: UNAUTHENTICATED" in message
    assert 9 <= clock["t"] <= 10


def _config(api_keys: dict[str, Any] | None) -> dict[str, Any]:
    ingress: dict[str, Any] = {
        "name": "ingress",
        "import_path": "services.ingress.deployment:build_app",
        "args": {"models": [{"name": "m1"}, {"name": "m2"}]},
    }
    if api_keys is not None:
        ingress["args"]["api_keys"] = api_keys
    other = {"name": "scheduler", "import_path": "services.scheduler.deployment:build_app"}
    return {"applications": [other, ingress]}


def test_models_and_key_come_from_the_ingress_config() -> None:
    assert ingress_models(_config(None)) == ["m1", "m2"]
    assert probe_key(_config(None)) is None
    assert probe_key(_config({"keys": {"sk-a": {"tenant": "t"}}})) is None  # anonymous serves
    required = {"keys": {"sk-a": {"tenant": "t"}, "sk-b": {"tenant": "u"}}, "required": True}
    assert probe_key(_config(required)) == "sk-a"


def test_the_key_goes_in_the_authorization_header() -> None:
    script = Script({"m1": [lambda: httpx.Response(200, json=OK)]})
    _run(script, ["m1"], api_key="sk-a")
    assert script.auth == ["Bearer sk-a"]


def _with_replicas(*replicas: dict[str, Any]) -> dict[str, Any]:
    config = _config(None)
    config["applications"][0]["args"] = {"replicas": list(replicas)}
    return config


@pytest.mark.parametrize(
    ("replicas", "starts"),
    [
        ((), ["m1", "m2"]),  # the scheduler lists no replica: every model of the ingress
        (({"application": "r0", "model": "m1"},), ["m1"]),
        (  # each replica's own start model; m1 only after a swap
            (
                {"application": "r0", "model": "m2", "swap_models": ["m1"]},
                {"application": "r1", "model": "m2", "swap_models": ["m1"]},
            ),
            ["m2"],
        ),
        (({"application": "r0", "model": "other"},), ["m1", "m2"]),  # none the ingress serves
    ],
)
def test_a_bench_waits_for_the_models_the_replicas_start_on(
    replicas: tuple[dict[str, Any], ...], starts: list[str]
) -> None:
    assert start_models(_with_replicas(*replicas)) == starts


def test_the_shipped_many_models_mesh_starts_on_two_of_its_three_models() -> None:
    config = yaml.safe_load((DEPLOY_DIR / "local-many-models.yaml").read_text())
    assert ingress_models(config) == ["tiny-llama", "tiny-llama-b", "tiny-llama-c"]
    assert start_models(config) == ["tiny-llama", "tiny-llama-b"]


@pytest.mark.parametrize(
    ("answers", "polls", "error"),
    [
        ([{"a": 1, "b": 1}], 1, None),  # every replica ready at once
        ([{}, {"a": 1}, {"a": 1, "b": 1}], 3, None),  # the second replica answers later
        ([{"a": 2, "b": 1}], 1, None),
        ([{"a": 1}], 6, "b 0/1"),  # never: the deadline names the model short of replicas
    ],
)
def test_a_bench_waits_until_every_replica_is_ready(
    answers: list[dict[str, int]], polls: int, error: str | None
) -> None:
    seen: list[dict[str, int]] = []
    now = [0.0]

    def ready() -> dict[str, int]:
        seen.append(answers[min(len(seen), len(answers) - 1)])
        return seen[-1]

    def sleep(s: float) -> None:
        now[0] += s

    def wait() -> None:
        wait_for_replicas(ready, {"a": 1, "b": 1}, 1.0, sleep, lambda: now[0])

    if error is None:
        wait()
    else:
        with pytest.raises(MeshNotReady, match=error):
            wait()
    assert len(seen) == polls


def test_the_replicas_expected_are_the_schedulers_by_start_model() -> None:
    config = yaml.safe_load((DEPLOY_DIR / "local-many-models.yaml").read_text())
    assert replicas_by_start_model(config) == {"tiny-llama": 1, "tiny-llama-b": 1}
    assert replicas_by_start_model(_config(None)) == {}


def _many_models(stack: str) -> dict[str, Any]:
    config = yaml.safe_load((DEPLOY_DIR / "local-many-models.yaml").read_text())
    return apply_stack(config, load_stack(stack))


@pytest.mark.parametrize("stack", ["vllm-fcfs-static", "serve-multiplex", "slomesh"])
def test_a_started_mesh_is_ready_once_every_replica_is_then_on_its_start_models(
    stack: str,
) -> None:
    """What `slomesh up` and the benches wait for (mesh.start): no completion before the
    scheduler counts both replicas ready (one answering first would take every placement, and
    the static router would pin a model there), and none for tiny-llama-c, which no replica
    starts on (it would swap a replica before any client request)."""
    config = _many_models(stack)
    answers = [{}, {"tiny-llama": 1}, {"tiny-llama": 1, "tiny-llama-b": 1}]
    polls: list[dict[str, int]] = []
    sent: list[tuple[str, int]] = []  # (model, polls of the scheduler before it)

    def ready() -> dict[str, int]:
        polls.append(answers[min(len(polls), len(answers) - 1)])
        return polls[-1]

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append((json.loads(request.content)["model"], len(polls)))
        return httpx.Response(200, json=OK)

    client = httpx.Client(transport=httpx.MockTransport(answer))
    took = wait_until_ready(config, BASE, ready, 30.0, client, lambda s: None)
    assert sent == [("tiny-llama", 3), ("tiny-llama-b", 3)]
    assert set(took) == {"tiny-llama", "tiny-llama-b"}


def test_replicas_short_at_the_deadline_end_the_wait_before_any_completion() -> None:
    now = [0.0]

    def sleep(s: float) -> None:
        now[0] += s

    def refuse(request: httpx.Request) -> httpx.Response:
        raise AssertionError("a completion was sent before every replica was ready")

    client = httpx.Client(transport=httpx.MockTransport(refuse))
    with pytest.raises(MeshNotReady, match="tiny-llama-b 0/1"):
        wait_until_ready(
            _many_models("vllm-fcfs-static"),
            BASE,
            lambda: {"tiny-llama": 1},
            5.0,
            client,
            sleep,
            lambda: now[0],
        )


def test_a_poll_that_fails_counts_as_none_ready_and_the_deadline_names_its_error() -> None:
    """The scheduler not answering yet is waited out; one that never answers is named (a
    Serve handle that cannot run in this process would otherwise look like replicas that never
    became ready)."""
    now = [0.0]
    polls = [0]

    def ready() -> dict[str, int]:
        polls[0] += 1
        if polls[0] < 3:
            raise TimeoutError("scheduler Health")
        return {"a": 1}

    def sleep(s: float) -> None:
        now[0] += s

    wait_for_replicas(ready, {"a": 1}, 5.0, sleep, lambda: now[0])
    assert polls[0] == 3

    def broken() -> dict[str, int]:
        raise RuntimeError("No event loop running")

    with pytest.raises(MeshNotReady, match=r"a 0/1 \(the last poll failed: RuntimeError: No ev"):
        wait_for_replicas(broken, {"a": 1}, 1.0, sleep, lambda: now[0])
