"""Head sampling of traces (shared/telemetry.py): a new trace is kept by its id at the
configured ratio; a span with a parent follows the parent's decision, so a trace is whole or
absent in every service."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.sampling import Decision
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context
from pydantic import ValidationError

from shared.telemetry import TracingConfig, export_delay_ms, sampler

LOW_ID = 1  # low 64 bits tiny: kept at any ratio > 0
HIGH_ID = (1 << 64) - 1  # low 64 bits at the top: kept only at ratio 1


def _parent(sampled: bool) -> object:
    ctx = SpanContext(
        trace_id=HIGH_ID,
        span_id=7,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT),
    )
    return set_span_in_context(NonRecordingSpan(ctx))


CASES = [
    # (ratio, trace id, parent: None (a new trace) / sampled flag, kept)
    (1.0, HIGH_ID, None, True),
    (0.0, LOW_ID, None, False),
    (0.1, LOW_ID, None, True),
    (0.1, HIGH_ID, None, False),
    (0.0, HIGH_ID, True, True),  # the caller's sampled traceparent wins
    (1.0, HIGH_ID, False, False),  # so does its decision not to sample
]


@pytest.mark.parametrize(("ratio", "trace_id", "parent", "kept"), CASES)
def test_head_sampling(ratio: float, trace_id: int, parent: bool | None, kept: bool) -> None:
    context = None if parent is None else _parent(parent)
    result = sampler(ratio).should_sample(context, trace_id, "request")
    assert (result.decision == Decision.RECORD_AND_SAMPLE) is kept


@pytest.mark.parametrize(
    ("settings", "delay_ms"),
    [
        ({"exporter": "file"}, 1000),
        ({"exporter": "console"}, 1000),
        ({"exporter": "otlp"}, 5000),
        ({"exporter": "file", "export_delay_ms": 250}, 250),
    ],
)
def test_export_delay_by_exporter(settings: dict, delay_ms: int) -> None:
    assert export_delay_ms(TracingConfig.model_validate(settings)) == delay_ms


@pytest.mark.parametrize(
    "settings",
    [
        {"sample_ratio": 1.5},
        {"sample_ratio": -0.1},
        {"export_batch_size": 0},
        {"export_delay_ms": 0},
    ],
)
def test_bad_settings_are_refused_naming_the_field(settings: dict) -> None:
    with pytest.raises(ValidationError) as err:
        TracingConfig.model_validate(settings)
    assert next(iter(settings)) in str(err.value)


def test_default_keeps_a_tenth_of_new_traces() -> None:
    assert TracingConfig().sample_ratio == 0.1
