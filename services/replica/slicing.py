"""Slice-level serving on a continuous-batching engine (SCLS §4 for continuous batching).

The scheduler's batch policies (SCLS DP batching, UELLM SLO-ODBS) hand each batch member a slice
budget: at most that many output tokens in this call. The replica runs the slice as an ordinary
request whose max_tokens is the budget; when the budget, not the request's own end, stopped it,
the stream ends with finish_reason "slice" and, from an engine with token ids (vLLM), the
context (prompt + output ids) to resume from. The next slice may run on any replica: it prefills
that context (vLLM's prefix cache keeps the shared part cheap) and continues counting from the
tokens already produced. Pure: no engine, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from shared.domain import Request


@dataclass(frozen=True, slots=True)
class SlicePlan:
    """What the engine runs for one slice of `original`."""

    request: Request
    """The engine's request: context = prompt + earlier output, max_tokens = this slice's cap."""
    prior_output_tokens: int
    """Output tokens produced in earlier slices (added to every count sent back)."""
    capped: bool
    """True when the slice budget, not the request's own end, bounds this call."""


def plan_slice(original: Request, slice_tokens: int, prior_output_tokens: int) -> SlicePlan:
    """The slice of `original` that may produce at most `slice_tokens` tokens (0: all the rest)
    after `prior_output_tokens` were produced. ValueError when nothing is left to produce."""
    if slice_tokens < 0 or prior_output_tokens < 0:
        raise ValueError(
            f"slice_tokens and prior_output_tokens must be >= 0, got {slice_tokens} and "
            f"{prior_output_tokens}"
        )
    left = original.output_tokens_to_generate - prior_output_tokens
    if left < 1:
        raise ValueError(
            f"prior_output_tokens: request '{original.request_id}' already produced "
            f"{prior_output_tokens} of its {original.output_tokens_to_generate} tokens"
        )
    if slice_tokens == 0 and prior_output_tokens == 0:
        return SlicePlan(original, 0, False)
    cap = min(left, slice_tokens) if slice_tokens else left
    forced = original.true_output_tokens
    request = replace(
        original,
        input_tokens=original.input_tokens + prior_output_tokens,
        max_tokens=min(original.max_tokens - prior_output_tokens, cap),
        true_output_tokens=None if forced is None else min(forced - prior_output_tokens, cap),
    )
    return SlicePlan(request, prior_output_tokens, bool(slice_tokens) and slice_tokens < left)


def slice_finish_reason(plan: SlicePlan, engine_reason: str) -> str:
    """The stream's finish reason: "slice" when the engine stopped at the slice's cap ("length")
    while the request has tokens left; otherwise the engine's own."""
    if plan.capped and engine_reason == "length":
        return "slice"
    return engine_reason
