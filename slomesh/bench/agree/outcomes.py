"""Why a class's requests missed their SLO, on each side of `bench-agree`.

An attainment gap says how far the simulator is off, not where. Each request ends one way:
it met its SLO, it was served late, or it was turned away by one of the rules in front of the
engines, named by its rejection reason (the live client reads the ingress's 429 body, the
simulator records the same rule's reason):
  - `ingress guard`: the ingress's delivered-latency guard (services/ingress/core/delivered.py,
    "measured on this mesh"), and its reject hold-off ("held at the ingress");
  - `TTFT guard`: the scheduler's TTFT guard (core/ttft_admission.py, "deadline-infeasible:
    predicted TTFT") and llm-d's latency-SLO admitter ("latency SLO:");
  - `queue`: the global queue's rules (expired, drain rate, flow control's TTL, full);
  - `other`: anything else (a refused placement, an error, a stream cut short).
Counted per stack and class on both sides, the page shows which class loses on which side and
to which rule.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from shared.metrics.records import RequestRecord

KINDS = ("met", "late", "ingress guard", "TTFT guard", "queue", "other")
"""How a request ended, in the page's column order."""

_RULES = (
    ("ingress guard", ("measured on this mesh", "held at the ingress")),
    ("TTFT guard", ("deadline-infeasible: predicted TTFT", "latency SLO:")),
    (
        "queue",
        (
            "cannot be met from the queue",
            "requests queued ahead drain",
            "flow control: queued",
            "requests queued (max_queued_requests)",
        ),
    ),
)


def outcome(r: RequestRecord) -> str:
    """How `r` ended (one of KINDS)."""
    if not r.rejected:
        if r.slo_met:
            return "met"
        return "late" if r.finished else "other"
    for kind, marks in _RULES:
        if any(m in r.reject_reason for m in marks):
            return kind
    return "other"


def outcomes(records: Sequence[RequestRecord]) -> dict[str, dict[str, int]]:
    """class -> how many of its requests ended each way (kinds with none left out)."""
    by: dict[str, Counter[str]] = {}
    for r in records:
        by.setdefault(r.class_name, Counter())[outcome(r)] += 1
    return {c: {k: n[k] for k in KINDS if n[k]} for c, n in sorted(by.items())}
