"""The ingress replicas' own HTTP door on the live mesh, beside Serve's proxy door:
the same answers on both (streaming and not, OpenAI errors naming the field, 429 +
Retry-After, one trace), and a client that leaves aborts the engine request."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest

from slomesh.launch.front_door import door_url
from tests.integration.conftest import GOLD_KEY
from tests.integration.handles import engine_load

MODEL = "llama-3.1-8b"
TINY = "tiny-llama"


def _doors(live_mesh: dict[str, Any]) -> dict[str, str]:
    front = door_url(live_mesh["config"])
    assert front is not None and front != live_mesh["http"]
    return {"front": front, "proxy": live_mesh["http"]}


@pytest.mark.parametrize("door", ["front", "proxy"])
def test_door_streams_and_answers(live_mesh: dict[str, Any], door: str) -> None:
    base = _doors(live_mesh)[door]
    client = openai.OpenAI(base_url=base, api_key=GOLD_KEY)
    chunks = list(
        client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "hello door"}],
            max_tokens=6,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.split() and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 6
    done = client.completions.create(model=MODEL, prompt="once", max_tokens=4)
    assert done.choices[0].finish_reason == "length" and done.usage.completion_tokens == 4
    assert MODEL in {m.id for m in client.models.list().data}


@pytest.mark.parametrize("door", ["front", "proxy"])
@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"model": MODEL, "prompt": "x", "max_tokens": 0}, 400, "max_tokens"),
        ({"model": MODEL, "prompt": "x", "temperature": "hot"}, 400, "body.temperature"),
        ({"model": "no-such-model", "prompt": "x"}, 404, "model"),
        ("{not json", 400, "body.1"),
    ],
)
def test_door_bad_input_is_the_same_openai_error(
    live_mesh: dict[str, Any], door: str, body: Any, status: int, param: str | None
) -> None:
    content = body if isinstance(body, str) else json.dumps(body)
    r = httpx.post(
        f"{_doors(live_mesh)[door]}/completions",
        content=content,
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["param"] == param and err["message"] and err["type"]


def _stream(url: str, max_tokens: int) -> tuple[int, str, str]:
    # ignore_eos: each job holds its seat for all max_tokens (a sampled length let a burst
    # fit the 2 x 4 seats at times, with no 429 to check)
    body = {
        "model": MODEL,
        "prompt": "long job",
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
    }
    with httpx.stream("POST", url, json=body, timeout=60) as r:
        if r.status_code != 200:
            r.read()
            return r.status_code, r.headers.get("retry-after", ""), r.text
        for _ in r.iter_lines():
            pass
        return 200, "", ""


def test_front_door_overload_is_429_with_retry_after(live_mesh: dict[str, Any]) -> None:
    """2 replicas x 4 in flight: a burst of 20 long requests on the front door gets 429s in
    OpenAI's shape with Retry-After and a drop reason, none hangs (60 s client timeout)."""
    url = f"{_doors(live_mesh)['front']}/completions"
    with ThreadPoolExecutor(20) as pool:
        results = list(pool.map(lambda _: _stream(url, 2000), range(20)))
    codes = [c for c, _, _ in results]
    assert codes.count(200) >= 8, codes
    rejected = [(ra, text) for c, ra, text in results if c == 429]
    assert rejected, codes
    for retry_after, text in rejected:
        assert retry_after.isdigit() and int(retry_after) >= 1
        assert json.loads(text)["error"]["type"] == "rate_limit_exceeded"


def _busy() -> int:
    return engine_load(("replica-0", "replica-1", "replica-2"))


def _wait_idle(timeout_s: float) -> int:
    deadline = time.time() + timeout_s
    busy = _busy()
    while busy and time.time() < deadline:
        time.sleep(0.2)
        busy = _busy()
    return busy


def _spans(live_mesh: dict[str, Any], trace_id: str, want: set[str]) -> dict[str, Any]:
    """The trace's spans by name, once `want` have all ended (or after 20 s)."""
    names: dict[str, Any] = {}
    deadline = time.time() + 20
    while time.time() < deadline and not want <= set(names):
        time.sleep(0.2)
        spans = [json.loads(line) for line in live_mesh["traces"].read_text().splitlines()]
        names = {s["name"]: s for s in spans if s["context"]["trace_id"] == trace_id}
    return names


@pytest.mark.parametrize("stream", [True, False])
def test_front_door_client_leaving_aborts_the_engine_request(
    live_mesh: dict[str, Any], stream: bool
) -> None:
    """The real vLLM replica (seconds for 2000 tokens; the simulated ones are too fast to
    leave in time): the client leaves after the first chunk (stream) or gives up waiting for
    the JSON answer (not streamed); the engine request is aborted, not run to its 2000
    tokens (its execution span ends without finish_reason "length")."""
    assert _wait_idle(20.0) == 0
    url = f"{_doors(live_mesh)['front']}/completions"
    body = {"model": TINY, "prompt": "long", "max_tokens": 2000, "ignore_eos": True}
    trace = ("%02x" % (0x10 + stream)) * 16
    headers = {"traceparent": f"00-{trace}-{'cd' * 8}-01"}
    if stream:
        with httpx.stream(
            "POST", url, json={**body, "stream": True}, headers=headers, timeout=30
        ) as r:
            lines = r.iter_lines()
            assert any(next(lines).startswith("data: {") for _ in range(3))
            assert _busy() >= 1
    else:
        with pytest.raises(httpx.ReadTimeout):  # the client gives up before the answer
            httpx.post(url, json=body, headers=headers, timeout=httpx.Timeout(30, read=0.5))
    execution = _spans(live_mesh, "0x" + trace, {"execution"}).get("execution")
    assert execution is not None, "no execution span: the request never reached the replica"
    assert execution["attributes"].get("slomesh.finish_reason") != "length", execution
    assert "slomesh.output_tokens" not in execution["attributes"], execution
    assert _wait_idle(15.0) == 0


def test_front_door_request_is_traced_like_the_proxy_door(live_mesh: dict[str, Any]) -> None:
    client = openai.OpenAI(base_url=_doors(live_mesh)["front"], api_key=GOLD_KEY)
    traceparent = "00-" + "fe" * 16 + "-" + "cd" * 8 + "-01"
    client.completions.create(
        model=MODEL, prompt="trace me", max_tokens=2, extra_headers={"traceparent": traceparent}
    )
    want = {"request", "admission", "predict", "grouping", "execution"}
    names = _spans(live_mesh, "0x" + "fe" * 16, want)
    assert want <= set(names), names
    assert names["request"]["parent_id"] == "0x" + "cd" * 8  # the caller's span
    assert names["execution"]["parent_id"] == names["request"]["context"]["span_id"]
