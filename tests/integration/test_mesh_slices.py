"""A batch-forming policy on the live mesh (SCLS DP batching, slices of 8 tokens): an OpenAI
call is served whole on the replica it is placed on (vLLM's serving state lives there), so the
slice budget is declined and the client sees one stream with every token, never handed back.

Reuses the session mesh: the test redeploys the scheduler with the batching policy (the live
options of `slomesh up --stack scls-live`) and puts the original back afterwards.
"""

from __future__ import annotations

import copy
import importlib
import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai
from ray import serve
from ray.serve.api import RunTarget

from slomesh.stacks import load_stack
from tests.integration.conftest import GOLD_KEY

MODEL = "llama-3.1-8b"
SLICE = 8
MAX_TOKENS = 20


def _deploy_scheduler(app: dict[str, Any]) -> None:
    module, _, attr = app["import_path"].partition(":")
    build = getattr(importlib.import_module(module), attr)
    target = build(app["args"])
    serve.run_many([RunTarget(target=target, name="scheduler", route_prefix=app["route_prefix"])])


def _stream(http: str, k: int) -> tuple[int, str | None, int]:
    client = openai.OpenAI(base_url=http, api_key=GOLD_KEY, max_retries=0)
    stream = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": f"slice me {k}"}],
        max_tokens=MAX_TOKENS,
        stream=True,
        stream_options={"include_usage": True},
    )
    finish, usage, events = None, 0, 0
    for event in stream:
        events += 1
        if event.choices and event.choices[0].finish_reason:
            finish = event.choices[0].finish_reason
        if event.usage is not None:
            usage = event.usage.completion_tokens
    return usage, finish, events


def test_mesh_batching_policy_serves_openai_calls_whole(live_mesh: dict[str, Any]) -> None:
    original = next(a for a in live_mesh["config"]["applications"] if a["name"] == "scheduler")
    sliced = copy.deepcopy(original)
    options = {"slice_iterations": SLICE, "min_interval_s": 0.2}
    sliced["args"]["policy"] = "batching"
    sliced["args"]["policy_options"] = (
        load_stack("scls-live").with_policy_options(options).policy_options
    )
    _deploy_scheduler(sliced)
    try:
        with ThreadPoolExecutor(3) as pool:
            results = list(pool.map(lambda k: _stream(live_mesh["http"], k), range(1, 4)))
    finally:
        _deploy_scheduler(original)
    for usage, finish, events in results:
        # every token arrived in one stream that ended once, with the request's own reason
        assert (usage, finish) == (MAX_TOKENS, "length"), results
        assert events >= 2
    time.sleep(1.0)  # the spans of the last requests reach the file
    spans = [json.loads(line) for line in live_mesh["traces"].read_text().splitlines()]
    resumed = [
        s
        for s in spans
        if s["name"] == "grouping" and "slomesh.resume_output_tokens" in s["attributes"]
    ]
    assert resumed == []  # no request was handed back after a slice
