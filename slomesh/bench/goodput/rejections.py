"""Which admission rule turned requests away at each rate of a bench-goodput ladder, from the
mesh's sampled traces.

Every 429 the mesh answers is raised inside the ingress's `admission` span, and that span's error
status carries the reason text of the rule that refused: the ingress's guard on delivered latency
(`services/ingress/core/delivered.py`), the scheduler's admission core or its policy (their
texts come back through the ingress), the ingress's own limits. Each such span is put to the
rate whose arrivals hold its start (vLLM's result: the time it was saved, `date`, and its
`duration`) and labelled as the ingress's metrics label it (`rejection_kind`), so the page and
the dashboard's `ray_slomesh_rejected_total{reason}` name the same rules.

Traces are head-sampled (`TracingConfig.sample_ratio` of the requests), so the counts are a
sample: their shares say which rule refused, not how many requests it refused (the 429 count of
vLLM's result says that).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from services.ingress.observer import rejection_kind
from shared.report.table import markdown_table
from slomesh.bench.goodput.harness import rate_windows

ADMISSION_SPAN = "admission"
"""The ingress span a rejection is raised in."""
INGRESS_SERVICE = "slomesh-ingress"
"""The `service.name` of the ingress's spans."""
ERROR_PREFIX = "APIError: "
"""How the span's error status starts its description (the exception's type)."""
WINDOW_SLACK_S = 1.0
"""A rate's window reaches this far beyond its arrivals on both sides (vLLM saves `date` to the
second, truncated: the end may be up to 1 s later)."""


def span_start_s(span: Mapping[str, Any]) -> float:
    """A span's start, unix seconds (its `start_time` is ISO 8601 UTC)."""
    return datetime.fromisoformat(str(span["start_time"]).replace("Z", "+00:00")).timestamp()


def rejection_reason(span: Mapping[str, Any]) -> str | None:
    """The reason text of an ingress admission span that ended in an error; None for others."""
    if span.get("name") != ADMISSION_SPAN:
        return None
    service = (span.get("resource") or {}).get("attributes", {}).get("service.name")
    if service != INGRESS_SERVICE:
        return None
    status = span.get("status") or {}
    if status.get("status_code") != "ERROR":
        return None
    return str(status.get("description") or "").removeprefix(ERROR_PREFIX)


def rejections_by_rate(
    lines: Sequence[str], windows: Mapping[float, tuple[float, float]]
) -> list[dict[str, Any]]:
    """Per rate (ascending): the sampled rejections, their count per `rejection_kind` label
    (most first) and one reason text of each label."""
    rows: dict[float, dict[str, Any]] = {
        rate: {"rate_rps": rate, "sampled": 0, "kinds": {}, "examples": {}}
        for rate in sorted(windows)
    }
    for line in lines:
        if not line.strip():
            continue
        try:
            span = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short while the mesh stopped
        reason = rejection_reason(span)
        if reason is None:
            continue
        at = span_start_s(span)
        rate = next((r for r, (lo, hi) in windows.items() if lo <= at <= hi), None)
        if rate is None:
            continue
        row, kind = rows[rate], rejection_kind(reason)
        row["sampled"] += 1
        row["kinds"][kind] = row["kinds"].get(kind, 0) + 1
        row["examples"].setdefault(kind, reason)
    for row in rows.values():
        row["kinds"] = dict(sorted(row["kinds"].items(), key=lambda kv: (-kv[1], kv[0])))
    return list(rows.values())


def read_rejections(traces: Path, result_dir: Path, rates: Sequence[float]) -> dict[str, Any]:
    """The analysis entry of one system: the sample ratio the mesh traced with and the rows."""
    from shared.telemetry import TracingConfig

    lines = traces.read_text(errors="replace").splitlines() if traces.exists() else []
    return {
        "sample_ratio": TracingConfig.model_fields["sample_ratio"].default,
        "rows": rejections_by_rate(lines, rate_windows(result_dir, rates, WINDOW_SLACK_S)),
    }


def rejections_table(
    name: str, found: Mapping[str, Any], rejected: Mapping[float, int], example_chars: int = 140
) -> str:
    """system, rate, 429s (vLLM's count), sampled rejections, their split by rule, and the
    reason text of the rule that refused most."""
    headers = ("system", "rate req/s", "rejected (429)", "sampled", "by rule", "reason (most)")
    rows = []
    for r in found["rows"]:
        n = r["sampled"]
        split = ", ".join(f"{k} {v} ({v / n:.0%})" for k, v in r["kinds"].items()) if n else "-"
        top = next(iter(r["kinds"]), None)
        text = r["examples"][top][:example_chars] if top else "-"
        rows.append(
            [
                name,
                f"{r['rate_rps']:g}",
                str(rejected.get(r["rate_rps"], "?")),
                str(n),
                split,
                text,
            ]
        )
    return markdown_table(headers, rows, left=(0, 4, 5))
