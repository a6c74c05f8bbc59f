"""TTFT guard (SCORPIO): LDF walk of the waiting queue, early rejection of misses."""

from __future__ import annotations

import math

import pytest

from services.replica.core.scorpio.ttft_guard import Rejection, TTFTGuard, WaitingRequest


def prefill(tokens: int) -> float:
    """1/1024 s per prompt token: exact in binary floats, so boundaries are exact."""
    return tokens / 1024


def w(rid: str, deadline: float, tokens: int, arrival: float = 0.0) -> WaitingRequest:
    return WaitingRequest(rid, arrival, deadline, tokens)


@pytest.mark.parametrize(
    ("waiting", "now_s", "ready_s", "margin_s", "rejected"),
    [
        # All fit: first tokens at 0.125 and 0.375.
        ([w("A", 1.0, 128), w("B", 2.0, 256)], 0.0, 0.0, 0.0, []),
        # B cannot fit (0.375 + 0.25 = 0.625 > 0.5); C still fits because B's prefill is not
        # counted (0.375 + 0.375 = 0.75 <= 0.8; it would be 1.0 if B were counted).
        ([w("C", 0.8, 384), w("A", 0.5, 384), w("B", 0.5, 256, 0.1)], 0.0, 0.0, 0.0, ["B"]),
        # Exactly at the deadline is admitted; any margin moves the boundary.
        ([w("A", 0.5, 512)], 0.0, 0.0, 0.0, []),
        ([w("A", 0.5, 512)], 0.0, 0.0, 0.001, ["A"]),
        ([w("A", 0.5, 511)], 0.0, 0.0, 1 / 1024, []),
        ([w("A", 0.5, 511)], 0.0, 0.0, 2 / 1024, ["A"]),
        # Already past its deadline, even with no prefill work at all.
        ([w("A", 1.5, 0), w("B", 3.0, 64)], 2.0, 0.0, 0.0, ["A"]),
        # ready_s later than now shifts everything: 0.25 + 0.25 = 0.5 fits, 0.25 + 0.5 does not.
        ([w("A", 0.5, 256)], 0.0, 0.25, 0.0, []),
        ([w("A", 0.5, 512)], 0.0, 0.25, 0.0, ["A"]),
        ([w("A", 0.5, 256), w("B", 1.0, 512)], 0.0, 0.25, 0.0, []),
        ([w("A", 0.5, 256), w("B", 1.0, 513)], 0.0, 0.25, 0.0, ["B"]),
        # ready_s earlier than now: the clock starts at now.
        ([w("A", 1.0, 512)], 0.5, 0.0, 0.0, []),
        ([w("A", 1.0, 513)], 0.5, 0.0, 0.0, ["A"]),
        # Rejections come back in LDF order.
        (
            [w("late", 0.2, 512), w("early", 0.1, 512), w("ok", 5.0, 1)],
            0.0,
            0.0,
            0.0,
            ["early", "late"],
        ),
        ([], 0.0, 0.0, 0.0, []),
    ],
)
def test_check(
    waiting: list[WaitingRequest],
    now_s: float,
    ready_s: float,
    margin_s: float,
    rejected: list[str],
) -> None:
    guard = TTFTGuard(prefill, margin_s=margin_s)
    assert [r.request_id for r in guard.check(waiting, now_s, ready_s)] == rejected


def test_reason_text() -> None:
    req = WaitingRequest("r1", 1.0, 1.5, 1264, class_name="tight")
    (rejection,) = TTFTGuard(lambda _: 1.234).check([req], now_s=1.0, ready_s=0.0)
    assert rejection == Rejection(
        "r1",
        "rejected early by the TTFT guard: predicted first token at +1.234 s after arrival "
        "exceeds the TTFT SLO of 0.500 s (class tight)",
    )


def test_reason_mentions_margin() -> None:
    req = WaitingRequest("r1", 0.0, 0.5, 512)
    (rejection,) = TTFTGuard(prefill, margin_s=0.01).check([req], now_s=0.0, ready_s=0.0)
    assert "+0.500 s after arrival (+ margin 0.010 s)" in rejection.reason
    assert "class default" in rejection.reason


def test_order_is_least_deadline_first_with_ties_by_arrival_then_id() -> None:
    waiting = [
        WaitingRequest("d", 0.3, 2.0, 10),
        WaitingRequest("c", 0.2, 1.0, 10),
        WaitingRequest("b", 0.1, 1.0, 10),
        WaitingRequest("a", 0.1, 1.0, 10),
        WaitingRequest("e", 0.0, 0.5, 10),
    ]
    order = [r.request_id for r in TTFTGuard(prefill).order(waiting)]
    assert order == ["e", "a", "b", "c", "d"]


def test_prefill_model_is_called_with_prefill_tokens() -> None:
    seen: list[int] = []

    def recording(tokens: int) -> float:
        seen.append(tokens)
        return 0.0

    TTFTGuard(recording).check([w("B", 2.0, 20), w("A", 1.0, 10)], 0.0, 0.0)
    assert seen == [10, 20]


@pytest.mark.parametrize("margin_s", [-0.1, math.nan, math.inf])
def test_invalid_margin_raises(margin_s: float) -> None:
    with pytest.raises(ValueError, match="margin_s"):
        TTFTGuard(prefill, margin_s=margin_s)


@pytest.mark.parametrize("bad", [-1.0, math.nan])
def test_invalid_prefill_time_raises(bad: float) -> None:
    with pytest.raises(ValueError, match="prefill_time_s"):
        TTFTGuard(lambda _: bad).check([w("A", 1.0, 10)], 0.0, 0.0)
