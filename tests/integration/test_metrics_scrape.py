"""The live mesh's Prometheus endpoint (`slomesh up --metrics-port`): after a few requests and an
overload burst, every metric a panel of deploy/grafana/slomesh.json queries is in the scrape,
under the name the dashboard uses."""

from __future__ import annotations

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from slomesh.launch import mesh

MODEL = "llama-3.1-8b"
DASHBOARD = mesh.DEPLOY_DIR.parent / "grafana" / "slomesh.json"
REASONS = {
    "ingress_capacity",
    "rate_limited",
    "no_replica",
    "queue_full",
    "replicas_full",
    "queue_drain",
    "queue_deadline",
    "predicted_infeasible",
    "other",
}


def panel_metrics() -> dict[str, set[str]]:
    """{series name: panel titles} of every series the dashboard's panels query."""
    out: dict[str, set[str]] = {}
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel.get("targets", []):
            bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', target["expr"])
            for name in re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", bare):
                if name.startswith("ray_slomesh_"):
                    out.setdefault(name, set()).add(panel["title"])
    return out


def scrape(url: str) -> dict[str, list[str]]:
    """{series name: its sample lines} of one scrape."""
    series: dict[str, list[str]] = {}
    for line in httpx.get(url, timeout=10).text.splitlines():
        if line and not line.startswith("#"):
            series.setdefault(re.split(r"[{ ]", line, maxsplit=1)[0], []).append(line)
    return series


def _complete(http: str, slo: str, max_tokens: int) -> int:
    body = {"model": MODEL, "prompt": "hello", "max_tokens": max_tokens, "slo": slo}
    return httpx.post(f"{http}/completions", json=body, timeout=60).status_code


def _stream(http: str, max_tokens: int) -> int:
    # ignore_eos: each job holds its seat for all max_tokens (a sampled length let a burst
    # fit the 2 x 4 seats at times, with no 429 to check)
    body = {
        "model": MODEL,
        "prompt": "long job",
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
    }
    with httpx.stream("POST", f"{http}/completions", json=body, timeout=120) as r:
        for _ in r.iter_lines():
            pass
        return r.status_code


def _tpot_targets(got: dict[str, list[str]]) -> set[str]:
    """SLO classes whose TPOT target is scraped."""
    return {
        m.group(1)
        for s in got.get("ray_slomesh_slo_tpot_seconds", [])
        if (m := re.search(r'slo_class="([^"]*)"', s))
    }


def test_every_dashboard_metric_is_scraped(live_mesh: dict[str, Any]) -> None:
    http = live_mesh["http"]
    deadline = time.monotonic() + 90  # an earlier test may have killed the replicas
    while _complete(http, "interactive", 2) != 200 and time.monotonic() < deadline:
        time.sleep(1.0)
    for slo in ("interactive", "chat", "relaxed"):  # chat and relaxed carry a TPOT target
        assert _complete(http, slo, 8) == 200
    with ThreadPoolExecutor(20) as pool:  # 2 replicas x 4 in flight: the burst is rejected
        codes = list(pool.map(lambda _: _stream(http, 2000), range(20)))  # long: they overlap
    assert 429 in codes, codes

    want = panel_metrics()
    assert len(want) >= 10, want
    deadline = time.monotonic() + 60  # Ray exports every few seconds
    while True:  # names may already be there from earlier tests: wait for this test's labels
        got = scrape(live_mesh["metrics"])
        missing = {name: titles for name, titles in want.items() if name not in got}
        if (not missing and {"chat", "relaxed"} <= _tpot_targets(got)) or (
            time.monotonic() > deadline
        ):
            break
        time.sleep(2)
    assert not missing, f"not scraped from {live_mesh['metrics']}: {missing}"

    met = [s for s in got["ray_slomesh_requests_total"] if 'outcome="met"' in s]
    assert met and any(float(s.rsplit(" ", 1)[1]) > 0 for s in met)  # goodput
    reasons = {
        m.group(1)
        for s in got["ray_slomesh_rejected_total"]
        if (m := re.search(r'reason="([^"]*)"', s))
    }
    assert reasons and reasons <= REASONS, reasons
    targets = _tpot_targets(got)
    assert {"chat", "relaxed"} <= targets, targets  # kept after their requests (gauges expire)
    replicas = {
        m.group(1)
        for s in got["ray_slomesh_in_flight_requests"]
        if (m := re.search(r'serving_replica="([^"]*)"', s))
    }
    assert {"replica-0", "replica-1"} <= replicas, replicas
