"""The books take a replica's pushed state over an older Status answer: a probe sent before the
latest push may carry a state taken before it (a swap still running), which would set the
books back until the next probe."""

from __future__ import annotations

import math

import pytest

from services.scheduler.core.live_view import LiveReplica


@pytest.mark.parametrize(
    ("pushed_s", "asked_s", "stale"),
    [
        (-math.inf, 5.0, False),  # never pushed: every answer counts
        (10.0, 9.5, True),  # the probe went out before the push came
        (10.0, 10.0, False),
        (10.0, 10.5, False),  # asked after the push: as fresh
    ],
)
def test_an_answer_to_a_probe_sent_before_the_latest_push_is_stale(
    pushed_s: float, asked_s: float, stale: bool
) -> None:
    rep = LiveReplica("r0", "cpu", "A", None, swap_profiles={"B": None})
    rep.pushed_s = pushed_s
    assert rep.answer_is_stale(asked_s) is stale
