"""The fast path live: with headroom, requests are placed on the ingress's lease
credits (no Predict/Admit before the stream), and the trace still has every span with the same
names and parents, the scheduler still records the placement, and the metrics still count the
request; once the replicas are full, arrivals take the full Admit path and the scheduler's
admission rules answer them (429 + drop reason)."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

MODEL = "llama-3.1-8b"


def _traces(live_mesh: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """{trace id: {span name: span}} of everything exported so far."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for line in live_mesh["traces"].read_text().splitlines():
        s = json.loads(line)
        out.setdefault(s["context"]["trace_id"], {})[s["name"]] = s
    return out


def _complete(http: str, trace_id: str, max_tokens: int = 2) -> int:
    traceparent = f"00-{trace_id}-{'cd' * 8}-01"
    body = {"model": MODEL, "prompt": "fast path", "max_tokens": max_tokens}
    r = httpx.post(
        f"{http}/completions", json=body, headers={"traceparent": traceparent}, timeout=60
    )
    return r.status_code


def test_fast_path_serves_with_the_same_spans_and_metrics(live_mesh: dict[str, Any]) -> None:
    http = live_mesh["http"]
    ids = [f"{k:08x}" + "fa57" * 6 for k in range(30)]
    for i, trace_id in enumerate(ids):
        assert _complete(http, trace_id) == 200
        if i < 4:
            time.sleep(0.3)  # the first requests fetch each ingress replica's grant
    want = {"request", "admission", "predict", "grouping", "execution"}
    fast: list[dict[str, dict[str, Any]]] = []
    deadline = time.time() + 15
    while time.time() < deadline:
        traces = _traces(live_mesh)
        mine = [traces.get("0x" + t, {}) for t in ids]
        fast = [
            t
            for t in mine
            if want <= set(t) and t["admission"]["attributes"].get("slomesh.fast_path")
        ]
        if len(fast) >= 5:
            break
        time.sleep(0.3)
    assert len(fast) >= 5, "no request of 30 sequential ones took the fast path"
    for names in fast:
        span_id = {n: s["context"]["span_id"] for n, s in names.items()}
        parent = {n: s["parent_id"] for n, s in names.items()}
        assert parent["admission"] == span_id["request"]
        assert parent["predict"] == span_id["admission"]  # off the critical path, same trace
        assert parent["grouping"] == span_id["admission"]
        assert parent["execution"] == span_id["request"]
        grouping = names["grouping"]["attributes"]
        assert grouping["slomesh.fast_path"] and grouping["slomesh.recorded"]
        assert grouping["slomesh.replica"] == names["admission"]["attributes"]["slomesh.replica"]
        assert names["request"]["attributes"]["slomesh.output_tokens"] == 2
    want_metrics = ("ray_slomesh_requests_total", "ray_slomesh_ttft_seconds_count")
    deadline = time.time() + 60  # Ray exports every few seconds
    scraped = ""
    while time.time() < deadline and not all(m in scraped for m in want_metrics):
        time.sleep(2)
        scraped = httpx.get(live_mesh["metrics"], timeout=10).text
    assert all(m in scraped for m in want_metrics), "the fast path's requests are not counted"


def _stream_long(http: str, trace_id: str) -> tuple[int, str]:
    # ignore_eos: every job holds its seat for all 2,000 tokens, so 20 at once surely fill the
    # 2 x 4 seats (a sampled length let the whole burst fit at times)
    body = {
        "model": MODEL,
        "prompt": "long job",
        "max_tokens": 2000,
        "ignore_eos": True,
        "stream": True,
    }
    headers = {"traceparent": f"00-{trace_id}-{'cd' * 8}-01"}
    url = f"{http}/completions"
    with httpx.stream("POST", url, json=body, headers=headers, timeout=120) as r:
        if r.status_code != 200:
            r.read()
            return r.status_code, r.headers.get("x-slomesh-drop-reason", "")
        for _ in r.iter_lines():
            pass
        return 200, ""


def test_without_headroom_arrivals_take_the_full_admission_path(live_mesh: dict[str, Any]) -> None:
    """2 replicas x 4 in flight (the fixture's admission limit): a burst of 20 long requests
    fills them; the rest take the full path and are answered by the scheduler's rules (429 +
    drop reason), not placed on stale credits."""
    http = live_mesh["http"]
    ids = [f"{k:08x}" + "b0057" * 4 + "abcd" for k in range(20)]
    with ThreadPoolExecutor(20) as pool:
        results = list(pool.map(lambda t: _stream_long(http, t), ids))
    codes = [c for c, _ in results]
    assert codes.count(200) >= 8 and 429 in codes, codes
    assert {d for c, d in results if c == 429} <= {"replicas-full", "sheddable-saturated"}
    time.sleep(2.0)
    traces = _traces(live_mesh)
    mine = [traces.get("0x" + t, {}) for t in ids]
    full_path = [
        t
        for t in mine
        if "admission" in t and not t["admission"]["attributes"].get("slomesh.fast_path")
    ]
    assert full_path, "every request of the burst was placed on credits"
    rejected = [
        t for t in full_path if t["admission"]["attributes"].get("slomesh.admitted") is False
    ]
    assert rejected and all("grouping" in t for t in rejected)  # the scheduler decided
