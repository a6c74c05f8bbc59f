"""Slice plans of the replica: what the engine runs for one slice, and when the
stream's end is a slice end rather than the request's."""

from __future__ import annotations

import pytest

from services.replica.slicing import plan_slice, slice_finish_reason
from shared.domain import SLO, Request


def req(max_tokens: int = 100, forced: int | None = None) -> Request:
    return Request("r", "m", 10, max_tokens, 0.0, SLO(1.0), true_output_tokens=forced)


@pytest.mark.parametrize(
    ("max_tokens", "forced", "slice_tokens", "prior", "inp", "cap", "forced_now", "capped"),
    [
        (100, None, 0, 0, 10, 100, None, False),  # no slice: the request as is
        (100, None, 40, 0, 10, 40, None, True),  # first slice
        (100, None, 40, 40, 50, 40, None, True),  # second: context grew by the output
        (100, None, 40, 80, 90, 20, None, False),  # last: the request's own end comes first
        (100, 50, 40, 40, 50, 10, 10, False),  # forced length: 10 left, no cap
        (100, 90, 40, 0, 10, 40, 40, True),  # forced length longer than the slice
        (100, None, 0, 30, 40, 70, None, False),  # resumed without a budget: all the rest
    ],
)
def test_replica_plan_slice(
    max_tokens: int,
    forced: int | None,
    slice_tokens: int,
    prior: int,
    inp: int,
    cap: int,
    forced_now: int | None,
    capped: bool,
) -> None:
    plan = plan_slice(req(max_tokens, forced), slice_tokens, prior)
    assert plan.request.input_tokens == inp
    assert plan.request.max_tokens == cap
    assert plan.request.true_output_tokens == forced_now
    assert plan.capped is capped and plan.prior_output_tokens == prior


@pytest.mark.parametrize(
    ("slice_tokens", "prior", "match"),
    [(10, 100, "already produced"), (-1, 0, ">= 0"), (10, -1, ">= 0")],
)
def test_replica_plan_slice_rejects_bad_input(slice_tokens: int, prior: int, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        plan_slice(req(), slice_tokens, prior)


@pytest.mark.parametrize(
    ("slice_tokens", "prior", "engine_reason", "expected"),
    [
        (40, 0, "length", "slice"),  # the budget stopped it, tokens left
        (40, 0, "stop", "stop"),  # end of sequence inside the slice: done
        (40, 0, "abort", "abort"),
        (40, 80, "length", "length"),  # the request's own max_tokens
        (0, 0, "length", "length"),
    ],
)
def test_replica_slice_finish_reason(
    slice_tokens: int, prior: int, engine_reason: str, expected: str
) -> None:
    plan = plan_slice(req(), slice_tokens, prior)
    assert slice_finish_reason(plan, engine_reason) == expected
