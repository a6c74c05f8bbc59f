"""Pure figures of `bench-mesh --compare`: percentiles, the decode slope, ratios to the bare
engine, the span breakdown of trace files, compare.json and the printed table.

Decode per token is the least-squares slope of median total latency against max_tokens over a
sweep (each extra token costs one engine step plus its relay), so fixed costs (HTTP, admission,
prefill) fall into the intercept and do not bias it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

SYSTEM_NAMES = (
    "bare-vllm",
    "ray-serve-llm",
    "slomesh-1",
    "slomesh-proxy",
    "slomesh-no-priority",
    "slomesh",
)
"""Every system `--compare` knows; slomesh (its default two replicas) always runs, the others
when named. `slomesh-1` is slomesh with one replica: the same engine count as the peers. The
slomesh rows talk to the ingress replicas' own front door; `slomesh-proxy` is slomesh (two
replicas) measured through Serve's HTTP proxy (port 8000) instead of the
front door. `slomesh-no-priority` is slomesh with its engines left at the mesh's CPU priority
(`vllm.engine_nice: null`): what the engine's priority does to the closed-loop run, beside it."""


@dataclass
class SystemResult:
    """What one system measured (lists in seconds); `ran` False with `why_not` when it could not
    start or failed while measured."""

    name: str
    engines: int
    ran: bool = False
    why_not: str | None = None
    startup_s: float | None = None
    first_token_s: list[float] = field(default_factory=list)
    total16_s: list[float] = field(default_factory=list)
    sweep_s: dict[int, list[float]] = field(default_factory=dict)
    c8_requests: int = 0
    c8_tokens: int = 0
    c8_errors: int = 0
    c8_seconds: float = 0.0
    cpu_outside_engine_s: float | None = None
    """CPU seconds of the system's processes other than vLLM's engine core, over the c8 run."""
    idle_seconds: float = 0.0
    idle_cpu_outside_engine_s: float | None = None
    """CPU seconds of the same processes over `idle_seconds` with no request in flight."""
    idle_cpu_by_process_s: dict[str, float] = field(default_factory=dict)
    """The same, per process title (where the fixed cost goes)."""
    spans: dict[str, dict[str, float]] = field(default_factory=dict)
    cpu_by_process_s: dict[str, float] = field(default_factory=dict)
    """CPU seconds per process title over the c8 run."""
    admissions: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per phase, how the system admitted its requests (slomesh: its schedulers' counters,
    admission_paths.py); empty for systems without counters."""


def pct_ms(xs: Iterable[float], q: float) -> float | None:
    """q-th percentile of `xs` (seconds) in ms; None when empty."""
    a = np.asarray(list(xs), dtype=float)
    a = a[np.isfinite(a)]
    return float(np.percentile(a, q) * 1e3) if a.size else None


def decode_slope_ms(sweep_s: dict[int, list[float]]) -> float | None:
    """ms per output token: least-squares slope of the median latency (s) over max_tokens.
    None with fewer than two distinct max_tokens values."""
    pts = [(n, float(np.median(v))) for n, v in sorted(sweep_s.items()) if v]
    if len(pts) < 2:
        return None
    x = np.array([p[0] for p in pts], dtype=float)
    y = np.array([p[1] for p in pts], dtype=float)
    slope = np.polyfit(x, y, 1)[0]
    return float(slope * 1e3)


def ratio(value: float | None, base: float | None) -> float | None:
    """value / base, None when either is missing or base is 0."""
    if value is None or base is None or base == 0:
        return None
    return value / base


def per_second(count: int, seconds: float) -> float | None:
    return count / seconds if seconds > 0 else None


def cpu_per_request(result: SystemResult) -> float | None:
    if result.cpu_outside_engine_s is None or result.c8_requests == 0:
        return None
    return result.cpu_outside_engine_s / result.c8_requests


def _ts(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def span_breakdown(
    lines: Iterable[str], window: tuple[float, float] | None = None
) -> dict[str, dict[str, float]]:
    """Per span name: p50/p99 duration (ms) and count, from OpenTelemetry JSON lines (the
    `file` exporter's format: one span object per line with start_time/end_time), only spans
    starting inside `window` (unix seconds) when given. Numeric span attributes named *_ms get
    rows of their own ("execution.slomesh.queue_and_prefill_ms"). Other lines are skipped."""
    values: dict[str, list[float]] = {}
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            span = json.loads(line)
            start = _ts(span["start_time"])
            d = _ts(span["end_time"]) - start
        except (ValueError, KeyError, TypeError):
            continue
        if window is not None and not window[0] <= start <= window[1]:
            continue
        name = str(span.get("name", "?"))
        values.setdefault(name, []).append(d)
        for key, v in (span.get("attributes") or {}).items():
            # durations only: an SLO target is not a measurement
            if key.endswith("_ms") and not key.endswith("slo_ms") and isinstance(v, int | float):
                values.setdefault(f"{name}.{key}", []).append(float(v) / 1e3)
    return {
        name: {"p50_ms": pct_ms(vs, 50) or 0.0, "p99_ms": pct_ms(vs, 99) or 0.0, "n": len(vs)}
        for name, vs in sorted(values.items())
    }


def system_json(r: SystemResult) -> dict[str, Any]:
    """One entry of compare.json's `systems` (a fixed schema, nothing more)."""
    return {
        "name": r.name,
        "engines": r.engines,
        "ran": r.ran,
        "why_not": r.why_not,
        "first_token_p50_ms": pct_ms(r.first_token_s, 50),
        "first_token_p99_ms": pct_ms(r.first_token_s, 99),
        "decode_ms_per_token": decode_slope_ms(r.sweep_s),
        "req_s_c8": per_second(r.c8_requests, r.c8_seconds),
        "tok_s_c8": per_second(r.c8_tokens, r.c8_seconds),
        "startup_s": r.startup_s,
    }


def compare_json(
    results: list[SystemResult], admission_capacity_rps: float | None
) -> dict[str, Any]:
    return {
        "systems": [system_json(r) for r in results],
        "admission_capacity_rps": admission_capacity_rps,
    }


def _fmt(x: float | None, spec: str = ".1f") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def _rows(r: SystemResult, base: SystemResult | None) -> dict[str, str]:
    j = system_json(r)
    bj = system_json(base) if base is not None and base.ran else None
    b = bj or {}

    def added(key: str) -> str:
        if j[key] is None or b.get(key) is None:
            return "-"
        return f"{j[key] - b[key]:+.1f}"

    def rat(key: str) -> str:
        return _fmt(ratio(j[key], b.get(key)), ".2f") + "x"

    cpu = cpu_per_request(r)
    return {
        "engines": str(r.engines),
        "first token p50 / p99, max_tokens=1 (ms)": (
            f"{_fmt(j['first_token_p50_ms'])} / {_fmt(j['first_token_p99_ms'])}"
        ),
        "  added over bare vLLM p50 / p99 (ms)": (
            f"{added('first_token_p50_ms')} / {added('first_token_p99_ms')}"
        ),
        "total latency p50, 16 tokens (ms)": _fmt(pct_ms(r.total16_s, 50)),
        "decode per token (ms)": f"{_fmt(j['decode_ms_per_token'], '.2f')} "
        f"({rat('decode_ms_per_token')})",
        "c8: req/s, output tok/s": f"{_fmt(j['req_s_c8'])}, {_fmt(j['tok_s_c8'], '.0f')} "
        f"({rat('tok_s_c8')})",
        "c8 errors": str(r.c8_errors),
        "start-up (s)": _fmt(j["startup_s"]),
        "CPU s/request outside the engine": _fmt(cpu, ".4f"),
    }


def format_table(results: list[SystemResult]) -> str:
    """The side-by-side table (ratios in parentheses are to bare vLLM), then each system that
    did not run with its reason."""
    base = next((r for r in results if r.name == "bare-vllm"), None)
    ran = [r for r in results if r.ran]
    lines = []
    if ran:
        cols = [_rows(r, base) for r in ran]
        width = max(len(k) for k in cols[0])
        colw = max(16, *(len(v) for c in cols for v in c.values()), *(len(r.name) for r in ran))
        lines.append(" " * width + " | " + " | ".join(r.name.ljust(colw) for r in ran))
        for key in cols[0]:
            lines.append(key.ljust(width) + " | " + " | ".join(c[key].ljust(colw) for c in cols))
    lines.extend(f"{r.name}: did not run: {r.why_not}" for r in results if not r.ran)
    return "\n".join(lines)


def format_spans(spans: dict[str, dict[str, float]]) -> str:
    if not spans:
        return "  (no spans recorded)"
    return "\n".join(
        f"  {name:<40} p50 {s['p50_ms']:8.2f} ms  p99 {s['p99_ms']:8.2f} ms  n={int(s['n'])}"
        for name, s in spans.items()
    )
