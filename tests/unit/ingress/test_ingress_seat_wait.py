"""The ingress's prediction of the wait for a seat in the engines' batch
(services/ingress/core/seat_wait.py, and its use in core/delivered.py)."""

from __future__ import annotations

import pytest

from services.ingress.core.delivered import DeliveredGuard, DeliveredGuardConfig
from services.ingress.core.seat_wait import seat_wait_s

M = "tiny"


def test_a_free_seat_means_no_wait() -> None:
    assert seat_wait_s([0.5, 0.7], [], 3) == 0.0
    assert seat_wait_s([], [], 0) == 0.0


def test_with_every_seat_taken_the_first_seat_to_free_is_the_wait() -> None:
    assert seat_wait_s([0.7, 0.2, 0.5], [], 3) == 0.2
    assert seat_wait_s([0.7, 0.2, 0.5], [], 2) == 0.2  # never fewer seats than running


def test_requests_waiting_ahead_take_the_first_seats_and_hold_them() -> None:
    assert seat_wait_s([0.2, 0.5], [1.0], 2) == 0.5
    assert seat_wait_s([0.2, 0.5], [1.0, 1.0], 2) == pytest.approx(1.2)
    # the idle seat goes to the first waiting, then to the second when the first is done
    assert seat_wait_s([0.5], [0.1, 0.1], 2) == pytest.approx(0.2)


def saturated(guard: DeliveredGuard) -> None:
    """One finished stream (TTFT 50 ms, TPOT 10 ms), then 4 streams of 101 tokens whose first
    tokens came at 1.0, 1.1, 1.2 and 1.3 s: their seats free at 2.0, 2.1, 2.2 and 2.3 s."""
    guard.start("done", M, 1.0, 0.0, True, 101)
    guard.first_token("done", 0.05)
    guard.end("done", 101, 1.05)
    for i in range(4):
        first = 1.0 + 0.1 * i
        guard.start(f"s{i}", M, 1.0, first - 0.05, True, 101)
        guard.first_token(f"s{i}", first)


def test_the_requests_waiting_ahead_decide_whether_a_seat_frees_in_time() -> None:
    guard = DeliveredGuard(DeliveredGuardConfig(min_samples=1, margin=1.0))
    saturated(guard)
    now = 1.4
    for i in range(3):
        guard.start(f"w{i}", M, 1.0, now - 0.15, True, 101)
    v = guard.check(M, 1.0, 0.05, 0.0, now)
    assert v.admit and v.ttft_s == pytest.approx(0.9 + 0.05)  # the 4th seat to free
    guard.start("w3", M, 1.0, now - 0.15, True, 101)
    v = guard.check(M, 1.0, 0.05, 0.0, now)
    assert not v.admit and v.ttft_s == pytest.approx(0.6 + 1.0 + 0.05)  # a 2nd round
    assert "predicted TTFT" in v.reason
    strict = DeliveredGuard(DeliveredGuardConfig(min_samples=1))  # margin 0.9: 0.95 s is out
    saturated(strict)
    for i in range(3):
        strict.start(f"w{i}", M, 1.0, now - 0.15, True, 101)
    assert not strict.check(M, 1.0, 0.05, 0.0, now).admit


def test_no_seat_wait_while_nobody_waits_long_for_a_first_token() -> None:
    guard = DeliveredGuard(DeliveredGuardConfig(min_samples=1))
    saturated(guard)
    assert guard.check(M, 1.0, 0.05, 0.0, 1.4).ttft_s == pytest.approx(0.05)  # none waiting
    for i in range(4):
        guard.start(f"w{i}", M, 1.0, 1.35, True, 101)  # in their prefill, 50 ms
    assert guard.check(M, 1.0, 0.05, 0.0, 1.4).ttft_s == pytest.approx(0.05)
    assert guard.check(M, 1.0, 0.05, 0.0, 1.46).ttft_s == pytest.approx(1.6 - 0.06 + 0.05)


def test_a_stream_holds_its_seat_for_the_answers_usual_length_not_its_max_tokens() -> None:
    guard = DeliveredGuard(DeliveredGuardConfig(min_samples=1))
    saturated(guard)  # the finished stream had 101 tokens
    for i in range(4):
        guard.start(f"w{i}", M, 1.0, 1.25, True, 2000)  # asking for up to 2000 tokens
    assert guard.check(M, 1.0, 0.05, 0.0, 1.4).ttft_s == pytest.approx(1.6 + 0.05)


def test_looser_requests_waiting_are_not_ahead_and_the_seat_wait_can_be_off() -> None:
    guard = DeliveredGuard(DeliveredGuardConfig(min_samples=1))
    saturated(guard)
    for i in range(4):
        guard.start(f"batch{i}", M, 600.0, 1.25, True, 101)
    assert guard.check(M, 1.0, 0.05, 0.0, 1.4).admit
    assert guard.check(M, 600.0, 0.05, 0.0, 1.4).ttft_s == pytest.approx(1.6 + 0.05)
    off = DeliveredGuard(DeliveredGuardConfig(min_samples=1, seat_wait=False))
    saturated(off)
    for i in range(4):
        off.start(f"w{i}", M, 1.0, 1.25, True, 101)
    v = off.check(M, 1.0, 0.05, 0.0, 1.4)
    assert v.admit and v.ttft_s == pytest.approx(0.15)  # the oldest one's wait only


def test_an_answer_sent_whole_holds_a_seat_from_its_admission() -> None:
    guard = DeliveredGuard(DeliveredGuardConfig(min_samples=1))
    saturated(guard)
    for i in range(4):
        guard.start(f"w{i}", M, 1.0, 1.25, True, 101)
    assert guard.check(M, 1.0, 0.05, 0.0, 1.4).ttft_s == pytest.approx(1.6 + 0.05)
    guard.start("whole", M, 1.0, 1.4, False, 101)  # a 5th seat, taken until about 2.4 s
    v = guard.check(M, 1.0, 0.05, 0.0, 1.4)
    assert not v.admit and v.ttft_s == pytest.approx(1.0 + 0.05)
