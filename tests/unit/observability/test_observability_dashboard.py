"""deploy/grafana: the dashboard and the alert rules parse, and every metric they query is one the
code registers, under the name Ray's exporter serves it (`ray_` prefix; counters registered with
`_total`; histograms as _bucket/_sum/_count). The live scrape: tests/integration."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
GRAFANA = ROOT / "deploy" / "grafana"
REGISTERING = [ROOT / "services/ingress/observer.py", ROOT / "services/scheduler/metrics.py"]


def registered() -> dict[str, str]:
    """{metric name: Counter | Gauge | Histogram} of every `metrics.<Kind>("name", ...)` call."""
    out: dict[str, str] = {}
    for path in REGISTERING:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("Counter", "Gauge", "Histogram")
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                out[str(node.args[0].value)] = node.func.attr
    return out


def scraped_names() -> set[str]:
    """The series names Ray's Prometheus exporter serves for the registered metrics."""
    names: set[str] = set()
    for name, kind in registered().items():
        base = f"ray_{name}"
        if kind == "Histogram":
            names |= {f"{base}_bucket", f"{base}_sum", f"{base}_count"}
        else:
            names.add(base)
    return names


def metric_names(expr: str) -> set[str]:
    """The slomesh series and recording rules a PromQL expression names (string literals,
    such as label values, left out)."""
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    return {t for t in re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", bare) if "slomesh" in t}


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GRAFANA / "slomesh.json").read_text())
    return data


def dashboard_exprs() -> list[tuple[str, str]]:
    """(panel title, expression) of every panel target and templating query."""
    d = dashboard()
    out = [(p["title"], t["expr"]) for p in d["panels"] for t in p.get("targets", [])]
    for var in d["templating"]["list"]:
        if var["type"] == "query":
            out.append((f"${var['name']}", var["query"]["query"]))
    return out


def rules() -> list[dict[str, Any]]:
    data = yaml.safe_load((GRAFANA / "alerts.yaml").read_text())
    return [r for g in data["groups"] for r in g["rules"]]


def test_registered_metrics_follow_prometheus_conventions() -> None:
    reg = registered()
    assert len(reg) >= 12, reg
    for name, kind in reg.items():
        assert re.fullmatch(r"slomesh_[a-z0-9_]+", name), name
        assert not name.endswith("_s"), f"{name}: base units are spelled out (_seconds)"
        if kind == "Counter":
            assert name.endswith("_total"), name
        else:
            assert not name.endswith("_total"), name
        if kind == "Histogram":
            assert name.endswith("_seconds"), name


def test_dashboard_parses_and_every_panel_queries_registered_metrics() -> None:
    d = dashboard()
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    panels = [p for p in d["panels"] if p["type"] != "row"]
    assert len(panels) >= 10
    for p in panels:
        assert p["targets"], p["title"]
        pos = p["gridPos"]
        assert pos["x"] + pos["w"] <= 24, p["title"]
    known = scraped_names()
    for title, expr in dashboard_exprs():
        names = metric_names(expr)
        assert names, (title, expr)
        assert names <= known, (title, names - known)
    used = {n for _, e in dashboard_exprs() for n in metric_names(e)}
    for must in (
        "ray_slomesh_ttft_seconds_bucket",
        "ray_slomesh_tpot_seconds_bucket",
        "ray_slomesh_slo_ttft_seconds",
        "ray_slomesh_slo_tpot_seconds",
        "ray_slomesh_requests_total",
        "ray_slomesh_output_tokens_total",
        "ray_slomesh_rejected_total",
        "ray_slomesh_queued_requests",
        "ray_slomesh_virtual_queue_requests",
        "ray_slomesh_in_flight_requests",
    ):
        assert must in used, must


def test_alert_rules_parse_and_reference_registered_metrics_and_their_recordings() -> None:
    rs = rules()
    recorded = {r["record"] for r in rs if "record" in r}
    alerts = [r for r in rs if "alert" in r]
    assert {a["labels"]["severity"] for a in alerts} == {"page", "ticket"}
    windows = {re.sub(r".*ratio_rate", "", name) for name in recorded}
    assert windows == {"5m", "30m", "1h", "2h", "6h", "1d", "3d"}
    known = scraped_names()
    for rule in rs:
        names = metric_names(rule["expr"])
        assert names, rule
        assert {n for n in names if ":" not in n} <= known, rule
        assert {n for n in names if ":" in n} <= recorded, rule
    for alert in alerts:
        assert "0.05" in alert["expr"], "burn rates are multiples of the 5% budget (95% SLO)"


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_promtool_checks_and_unit_tests_the_rules() -> None:
    for args in (["check", "rules", "alerts.yaml"], ["test", "rules", "alerts_test.yaml"]):
        done = subprocess.run(
            ["promtool", *args], cwd=GRAFANA, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stdout + done.stderr
