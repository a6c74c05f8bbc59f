"""Tenants and bands on the live mesh: bad tenancy headers are OpenAI 400s naming the header; a
request above its entitlement is a 403 naming the field; under a burst, sheddable requests are
shed first, each answered with 429, Retry-After and x-slomesh-drop-reason (none hangs), while
critical requests (from a key entitled to them) are served."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

MODEL = "llama-3.1-8b"
OBJ = "x-gateway-inference-objective"
GW = "x-gateway-inference-fairness-id"
GOLD_KEY = "sk-test-gold"  # conftest.mesh_config's key entitled to the critical band


@pytest.mark.parametrize(
    ("headers", "param"),
    [({OBJ: "gold"}, OBJ), ({GW: "two words"}, GW), ({"x-llm-d-slo-ttft-ms": "-1"}, None)],
)
def test_mesh_bad_tenancy_header_is_a_clear_400(
    live_mesh: dict[str, Any], headers: dict[str, str], param: str | None
) -> None:
    body = {"model": MODEL, "prompt": "hi", "max_tokens": 2}
    r = httpx.post(f"{live_mesh['http']}/completions", json=body, headers=headers, timeout=30)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error"
    assert err["param"] == (param or "x-llm-d-slo-ttft-ms") and err["message"]


@pytest.mark.parametrize(
    ("headers", "body", "param"),
    [({OBJ: "critical"}, {}, OBJ), ({}, {"slo": "tight"}, "slo"), ({GW: "gold"}, {}, GW)],
)
def test_mesh_above_the_entitlement_is_a_clear_403(
    live_mesh: dict[str, Any], headers: dict[str, str], body: dict[str, Any], param: str
) -> None:
    body = {"model": MODEL, "prompt": "hi", "max_tokens": 2, **body}
    r = httpx.post(f"{live_mesh['http']}/completions", json=body, headers=headers, timeout=30)
    assert r.status_code == 403, r.text
    err = r.json()["error"]
    assert (err["type"], err["param"], err["code"]) == (
        "permission_error",
        param,
        "entitlement_exceeded",
    )


def _call(url: str, objective: str, tenant: str) -> tuple[str, int, str, str, float]:
    # ignore_eos: every job runs its 3,000 tokens (about a second on the simulated replicas),
    # so the critical ones surely fill the seats and queue before the sheddable burst
    body = {
        "model": MODEL,
        "prompt": "long job",
        "max_tokens": 3000,
        "ignore_eos": True,
        "stream": True,
    }
    headers = {OBJ: objective, GW: tenant, "x-slo-ttft-ms": "20000"}
    if objective == "critical":  # anonymous callers may not ask for the critical band
        headers["authorization"] = f"Bearer {GOLD_KEY}"
    t0 = time.monotonic()
    with httpx.stream("POST", url, json=body, headers=headers, timeout=60) as r:
        if r.status_code != 200:
            r.read()
            return (
                objective,
                r.status_code,
                r.headers.get("retry-after", ""),
                r.headers.get("x-slomesh-drop-reason", ""),
                time.monotonic() - t0,
            )
        for _ in r.iter_lines():
            pass
        return objective, 200, "", "", time.monotonic() - t0


def test_mesh_sheddable_traffic_is_shed_first_and_answered(live_mesh: dict[str, Any]) -> None:
    """2 simulated replicas x 4 in flight: 12 critical requests fill them and queue, then 24
    sheddable ones arrive while critical work waits."""
    url = f"{live_mesh['http']}/completions"
    jobs = [("critical", f"gold-{k % 2}") for k in range(12)]
    jobs += [("sheddable", f"free-{k % 3}") for k in range(24)]
    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = []
        for objective, tenant in jobs:
            futures.append(pool.submit(_call, url, objective, tenant))
            time.sleep(0.01)  # critical requests first
        results = [f.result() for f in futures]
    by = {o: [r for r in results if r[0] == o] for o in ("critical", "sheddable")}
    shed = [r for r in by["sheddable"] if r[1] != 200]
    critical_lost = [r for r in by["critical"] if r[1] != 200]
    print(
        f"critical served {len(by['critical']) - len(critical_lost)}/12, sheddable shed "
        f"{len(shed)}/24 (drop reasons {sorted({r[3] for r in shed})}, answered in at most "
        f"{max((r[4] for r in shed), default=0):.2f} s)"
    )
    for _, status, retry_after, drop, _ in (*shed, *critical_lost):
        assert status in (429, 503)
        assert retry_after.isdigit() and int(retry_after) >= 1
        assert drop, "every rejection names its drop reason"
    assert shed, "a sheddable burst behind queued critical work is shed"
    assert len(critical_lost) <= len(shed)
    shed_reasons = ("sheddable-saturated", "shed-for-critical", "deadline-expired")
    assert all(r[3] in shed_reasons for r in shed if r[1] == 429)
