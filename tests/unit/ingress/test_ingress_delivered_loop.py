"""The delivered guard counts the ingress loop's delay as time a request already spent, and its
rejection names that delay (services/ingress/core/delivered.py `check`, `loop_delay_of`)."""

from __future__ import annotations

import pytest

from services.ingress.core.delivered import DeliveredGuard, DeliveredGuardConfig, loop_delay_of

M = "tiny"


def _guard(ttft_s: float) -> DeliveredGuard:
    """A guard whose TTFT prediction at load 2 is `ttft_s`, with one request in flight."""
    guard = DeliveredGuard(DeliveredGuardConfig(min_samples=1, seat_wait=False))
    for k in range(2):
        guard.start(f"s{k}", M, 2.0, 0.0)
        guard.first_token(f"s{k}", ttft_s)
        guard.end(f"s{k}", 11, ttft_s + 0.1)
    guard.start("busy", M, 2.0, 1.0)
    guard.first_token("busy", 1.0)
    return guard


@pytest.mark.parametrize(
    ("ttft_s", "waited_s", "loop_lag_s", "admit", "named"),
    [
        (1.5, 0.0, 0.0, True, None),  # 1.5 <= 2 x 0.9
        (1.5, 0.0, 0.2, True, None),  # 1.7: still within
        (1.5, 0.0, 0.4, False, 0.4),  # 1.9: the loop's delay tips it
        (1.5, 0.2, 0.2, False, 0.2),  # waited and delay add up
        (1.9, 0.0, 0.0, False, None),  # late without any delay: none named
        (1.5, 0.4, 0.0, False, None),  # waiting alone is not the loop's delay
    ],
)
def test_the_loop_delay_counts_as_time_spent_and_a_rejection_names_it(
    ttft_s: float, waited_s: float, loop_lag_s: float, admit: bool, named: float | None
) -> None:
    v = _guard(ttft_s).check(M, 2.0, None, waited_s, 2.0, loop_lag_s)
    assert v.admit is admit
    if not admit:
        assert v.reason.startswith(f"predicted TTFT {ttft_s + waited_s + loop_lag_s:.3f} s")
        assert loop_delay_of(v.reason) == named


def test_only_a_guard_rejection_names_a_loop_delay() -> None:
    assert loop_delay_of("queue cannot reach it") is None
    assert (
        loop_delay_of("HTTP 429: predicted TTFT 2.1 s (0.25 s of it the ingress loop's delay)")
        == 0.25
    )
