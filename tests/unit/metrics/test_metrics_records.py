"""RequestRecord derived properties: TTFT / TPOT / E2E and slo_met edge cases."""

from __future__ import annotations

import pytest

from shared.metrics.records import RequestRecord


def make(
    *,
    arrival: float = 10.0,
    first: float | None = 11.0,
    finish: float | None = 13.0,
    out: int = 5,
    ttft_dl: float = 1.0,
    tpot_t: float | None = 0.5,
    e2e_dl: float | None = None,
    rejected: bool = False,
) -> RequestRecord:
    """Default: arrives at 10, first token at 11 (TTFT 1.0), finishes at 13 with 5 tokens
    (TPOT (13 - 11) / 4 = 0.5, E2E 3.0): exactly at both the TTFT deadline and TPOT target."""
    return RequestRecord(
        request_id="r",
        model="m",
        class_name="chat",
        tenant="t",
        instance=None if rejected else "i0",
        arrival_s=arrival,
        input_tokens=10,
        output_tokens=out,
        first_token_s=first,
        finish_s=finish,
        ttft_deadline_s=ttft_dl,
        tpot_target_s=tpot_t,
        e2e_deadline_s=e2e_dl,
        rejected=rejected,
    )


def test_derived_latencies() -> None:
    r = make()
    assert r.ttft_s == pytest.approx(1.0)
    assert r.tpot_s == pytest.approx(0.5)
    assert r.e2e_s == pytest.approx(3.0)
    assert r.finished


@pytest.mark.parametrize(
    ("case", "kwargs", "met"),
    [
        ("exactly at TTFT deadline and TPOT target", {}, True),
        ("TTFT just over deadline", {"first": 11.01, "finish": 13.01}, False),
        ("TPOT just over target", {"finish": 13.04}, False),  # 2.04 / 4 = 0.51
        ("no TPOT target: slow decode still met", {"finish": 30.0, "tpot_t": None}, True),
        # single token: TPOT is 0 whatever the target, first == finish
        ("single token, TPOT 0", {"out": 1, "finish": 11.0, "tpot_t": 0.0}, True),
        ("e2e exactly at deadline", {"e2e_dl": 3.0}, True),
        ("e2e over deadline", {"e2e_dl": 2.9}, False),
        ("e2e deadline alone can fail", {"tpot_t": None, "e2e_dl": 2.5}, False),
        ("rejected", {"rejected": True, "first": None, "finish": None}, False),
        ("unfinished: no finish time", {"finish": None}, False),
        ("never started", {"first": None, "finish": None}, False),
        ("rejected even with finish time", {"rejected": True}, False),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_slo_met(case: str, kwargs: dict[str, object], met: bool) -> None:
    assert make(**kwargs).slo_met is met, case  # type: ignore[arg-type]


@pytest.mark.parametrize("out", [0, 1])
def test_tpot_zero_for_single_or_no_token(out: int) -> None:
    assert make(out=out, finish=15.0).tpot_s == 0.0


def test_latencies_none_when_missing() -> None:
    r = make(first=None, finish=None)
    assert (r.ttft_s, r.tpot_s, r.e2e_s) == (None, None, None)
    assert not r.finished
    unfinished = make(finish=None)
    assert unfinished.ttft_s == pytest.approx(1.0)
    assert unfinished.tpot_s is None and unfinished.e2e_s is None
