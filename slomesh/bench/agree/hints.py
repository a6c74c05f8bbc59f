"""The length hints the live mesh gives a trace's requests, for the simulated side of bench-agree.

Live, a stack whose `length_source` is `hints` plans on each request's length hint: the ingress
asks the predictor application (its default predictor, "learned", unless the mesh's config names
another) with the request's prompt, and the scheduler reads the answer as the request's
`LengthHint` (services/scheduler/args.py `with_length_hint`). A simulated request carries no hint,
so a batch former planning on hints planned every request at half its max_tokens (the prior of
`hinted_remaining_tokens`) and cut it into slices the live mesh never cut.

So the simulated requests of such a stack carry the hints of the same predictor, built from the
live config's predictor arguments and run with the same steps the predictor application runs
(services/predictor/online.py) on the same prompts: first over the calibration traces the live
mesh served before the trace, then over the trace, each request predicted at its arrival and its
length learned after it (`predict_then_observe`, the line-by-line replay of the predictor's
stream). One difference: live, a completion is learned when it ends, seconds after the arrival
that is predicted next; here it is learned before the next arrival.

Pure apart from the predictor's own state; no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from services.predictor import online
from services.predictor.core.registry import create_predictor
from services.scheduler.core.qlm.length_estimates import hint_from_prediction
from shared.domain import Request
from slomesh.bench.agree.workload import AgreeRequest
from slomesh.stacks import StackConfig


def plans_on_hints(stack: StackConfig) -> bool:
    """Whether `stack` plans on the requests' length hints (its `length_source` is `hints`)."""
    return stack.stages["length_source"].plugin == "hints"


def with_live_hints(
    requests: Sequence[Request],
    trace: Sequence[AgreeRequest],
    warm: Iterable[Sequence[AgreeRequest]],
    prompt_of: Callable[[AgreeRequest], str],
    predictor: str,
    config: Mapping[str, Any] | None,
) -> list[Request]:
    """`requests` (the trace's, in trace order) each with the hint `predictor` (built with
    `config`) gives it after the `warm` traces (the calibration traces, in the order they ran)
    were predicted and learned (module docstring)."""
    core = create_predictor(predictor, config)
    model = requests[0].model if requests else ""
    for a in (a for reqs in warm for a in reqs):
        online.predict_then_observe(core, a.to_request(model), prompt_of(a), a.output_tokens)
    out = []
    for r, a in zip(requests, trace, strict=True):
        dist = online.predict_then_observe(core, r, prompt_of(a), a.output_tokens)
        hint = hint_from_prediction(
            dist.mean_tokens,
            list(dist.bucket_upper_tokens),
            list(dist.bucket_probs),
            r.max_tokens,
            dist.version,
        )
        out.append(r if hint is None else replace(r, length_hint=hint))
    return out
