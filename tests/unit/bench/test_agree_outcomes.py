"""How each request ended on either side of bench-agree (slomesh/bench/agree/outcomes.py), and
the page's table of it per stack and class."""

from __future__ import annotations

import pytest

from shared.metrics.records import RequestRecord
from slomesh.bench.agree.outcomes import outcome, outcomes
from slomesh.bench.agree.page import render, update_data


def _rec(cls: str = "short", first_s: float | None = 0.5, reason: str = "") -> RequestRecord:
    return RequestRecord(
        "r", "m", cls, "t", "i", 0.0, 10, 4, first_s, None if first_s is None else first_s + 0.1,
        2.0, None, None, rejected=bool(reason), reject_reason=reason,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("record", "kind"),
    [
        (_rec(), "met"),
        (_rec(first_s=2.5), "late"),
        (_rec(first_s=None), "other"),  # never finished, not rejected
        (
            _rec(
                reason='HTTP 429: {"error":{"message":"predicted TTFT 2.4 s at 9 requests in '
                "flight (measured on this mesh in the last 10 s) exceeds"
            ),
            "ingress guard",
        ),
        (_rec(reason="overloaded: x (held at the ingress)"), "ingress guard"),
        (_rec(reason="deadline-infeasible: predicted TTFT 3.1 s on replica i0"), "TTFT guard"),
        (_rec(reason="latency SLO: no replica can meet it"), "TTFT guard"),
        (_rec(reason="overloaded: TTFT deadline cannot be met from the queue"), "queue"),
        (_rec(reason="flow control: queued 60 s (request TTL)"), "queue"),
        (_rec(reason="overloaded: all 2 replicas of 'm' have 64 requests in flight"), "other"),
        (_rec(reason="HTTP 500: engine failed"), "other"),
    ],
)
def test_each_request_ends_one_way(record: RequestRecord, kind: str) -> None:
    assert outcome(record) == kind


def test_the_page_shows_how_classes_ended_on_both_sides_and_leaves_out_the_all_met() -> None:
    live = [
        _rec(),
        _rec(first_s=2.5),
        _rec("long"),
        _rec(reason="deadline-infeasible: predicted TTFT"),
    ]
    sim = [_rec(), _rec(), _rec("long"), _rec(reason="deadline-infeasible: predicted TTFT")]
    assert outcomes(live) == {"long": {"met": 1}, "short": {"met": 1, "late": 1, "TTFT guard": 1}}
    args = {
        "requests": 4, "rate": 1.0, "seed": 0, "classes": "short:1:2:4:10-10", "replicas": 1,
        "max_num_seqs": 2, "max_num_batched_tokens": 64, "profile": "p.json", "tie_points": 1.0,
    }  # fmt: skip
    row = {"stack": "a", "class_name": "all", "requests": 4, "sim_pct": 50.0, "live_pct": 25.0}
    report = {
        "args": args,
        "rows": [row],
        "outcomes": {"a": {"live": outcomes(live), "sim": outcomes(sim)}},
    }
    page = render(update_data({}, report, "cmd"))
    cells = [[c.strip() for c in ln.split("|")[1:-1]] for ln in page.splitlines() if "| a " in ln]
    ends = [c for c in cells if len(c) == 8]
    assert ends == [["a", "short", "1 / 2", "1 / 0", "0 / 0", "1 / 1", "0 / 0", "0 / 0"]]
