"""A replica enforces the ingress's request limits itself (defence in depth)."""

from __future__ import annotations

import pytest

from services.replica.limits import LimitExceeded, ReplicaLimits, check_limits

LIMITS = ReplicaLimits(max_tokens=100, min_priority=-5, max_priority=5, max_prompt_bytes=10)


@pytest.mark.parametrize(
    ("max_tokens", "priority", "prompt", "error"),
    [
        (100, 0, "hi", None),
        (1, -5, "0123456789", None),
        (101, 0, "hi", "meta.max_tokens must be between 1 and 100, got 101"),
        (0, 0, "hi", "meta.max_tokens must be between 1 and 100, got 0"),
        (10, -6, "hi", "meta.priority must be between -5 and 5, got -6"),
        (10, 6, "hi", "meta.priority must be between -5 and 5, got 6"),
        (10, 0, "01234567890", "prompt must be at most 10 bytes, got 11"),
        (10, 0, "ééééé" + "é", "prompt must be at most 10 bytes, got 12"),  # bytes, not chars
    ],
)
def test_replica_limits(max_tokens: int, priority: int, prompt: str, error: str | None) -> None:
    if error is None:
        check_limits(LIMITS, max_tokens, priority, prompt)
    else:
        with pytest.raises(LimitExceeded, match=error):
            check_limits(LIMITS, max_tokens, priority, prompt)


def test_replica_limits_default_to_the_ingress_caps() -> None:
    d = ReplicaLimits()
    assert (d.max_tokens, d.min_priority, d.max_priority) == (8192, -1000, 1000)
