"""Length sources: trace quantiles are reproduced, correlation kept, caps applied."""

from __future__ import annotations

import numpy as np
import pytest

from shared.workloads.length_samplers import (
    clip_lengths,
    fixed_lengths,
    sample_lengths,
    trace_lengths,
    uniform_lengths,
)
from shared.workloads.spec import LengthSpec
from shared.workloads.traces import load_azure_trace, quantiles

N = 20_000
QS = (0.5, 0.9, 0.99)


@pytest.mark.parametrize(("source", "name"), [("azure-conv", "conv"), ("azure-code", "code")])
@pytest.mark.parametrize("column", ["input", "output"])
def test_trace_source_matches_trace_quantiles(source: str, name: str, column: str) -> None:
    trace = load_azure_trace(name)  # type: ignore[arg-type]
    # caps above the trace's maxima, so no clipping distorts the tail
    spec = LengthSpec(source=source, max_input_tokens=16_384, max_tokens=4_096)  # type: ignore[arg-type]
    inputs, outputs = sample_lengths(spec, N, np.random.default_rng(3))
    got = quantiles(inputs if column == "input" else outputs, QS)
    want = quantiles(trace.input_tokens if column == "input" else trace.output_tokens, QS)
    for q in QS:
        assert got[q] == pytest.approx(want[q], rel=0.06), f"p{int(q * 100)}"


def test_trace_rows_are_sampled_jointly() -> None:
    trace = load_azure_trace("conv")
    pairs = set(zip(trace.input_tokens.tolist(), trace.output_tokens.tolist(), strict=True))
    inputs, outputs = trace_lengths("conv", 2_000, np.random.default_rng(4))
    assert all(p in pairs for p in zip(inputs.tolist(), outputs.tolist(), strict=True))
    trace_corr = np.corrcoef(trace.input_tokens, trace.output_tokens)[0, 1]
    inputs, outputs = trace_lengths("conv", N, np.random.default_rng(4))
    assert np.corrcoef(inputs, outputs)[0, 1] == pytest.approx(trace_corr, abs=0.03)


def test_trace_in_order_replays_rows_and_wraps() -> None:
    trace = load_azure_trace("code")
    m = len(trace)
    inputs, outputs = trace_lengths("code", 5, in_order=True, start_index=m - 2)
    rows = [m - 2, m - 1, 0, 1, 2]
    assert inputs.tolist() == trace.input_tokens[rows].tolist()
    assert outputs.tolist() == trace.output_tokens[rows].tolist()


def test_fixed_source() -> None:
    spec = LengthSpec(source="fixed", input_tokens=512, output_tokens=128)
    inputs, outputs = sample_lengths(spec, 10, np.random.default_rng(0))
    assert inputs.tolist() == [512] * 10
    assert outputs.tolist() == [128] * 10


def test_uniform_mega_prompts_with_trace_outputs() -> None:
    spec = LengthSpec(source="uniform", input_min_tokens=3_000, input_max_tokens=4_000)
    inputs, outputs = sample_lengths(spec, N, np.random.default_rng(5))
    assert inputs.min() >= 3_000 and inputs.max() <= 4_000
    assert inputs.min() < 3_010 and inputs.max() > 3_990  # spans the range, both ends inclusive
    assert inputs.mean() == pytest.approx(3_500, rel=0.01)
    conv_out = load_azure_trace("conv").output_tokens
    assert set(np.unique(outputs).tolist()) <= set(conv_out.tolist())
    assert np.median(outputs) == pytest.approx(np.median(conv_out), rel=0.05)


def test_uniform_range_of_one_value() -> None:
    inputs, _ = uniform_lengths(7, 7, "code", 50, np.random.default_rng(0))
    assert inputs.tolist() == [7] * 50


@pytest.mark.parametrize(
    ("spec", "max_in", "max_out"),
    [
        (LengthSpec(source="azure-conv", max_input_tokens=1_000, max_tokens=100), 1_000, 100),
        (LengthSpec(source="azure-code", max_input_tokens=2_048, max_tokens=16), 2_048, 16),
        (
            LengthSpec(source="fixed", input_tokens=9_000, output_tokens=5_000, max_tokens=256),
            4_096,
            256,
        ),
        (
            LengthSpec(
                source="uniform",
                input_min_tokens=3_000,
                input_max_tokens=4_000,
                max_input_tokens=3_500,
            ),
            3_500,
            2_048,
        ),
    ],
)
def test_lengths_clipped_to_caps(spec: LengthSpec, max_in: int, max_out: int) -> None:
    inputs, outputs = sample_lengths(spec, 5_000, np.random.default_rng(6))
    assert inputs.max() == max_in  # the cap binds for these sources
    assert inputs.min() >= 1
    assert outputs.max() <= max_out
    assert outputs.min() >= 1
    if spec.source != "uniform":
        assert outputs.max() == max_out


def test_clip_raises_zeros_to_one() -> None:
    inputs, outputs = clip_lengths(np.array([0, 5, 99]), np.array([-3, 0, 7]), 50, 6)
    assert inputs.tolist() == [1, 5, 50]
    assert outputs.tolist() == [1, 1, 6]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: fixed_lengths(0, 5, 3), "input_tokens must be >= 1"),
        (lambda: fixed_lengths(5, 0, 3), "output_tokens must be >= 1"),
        (lambda: fixed_lengths(5, 5, -1), "n must be >= 0"),
        (lambda: uniform_lengths(10, 5, "conv", 3, np.random.default_rng(0)), "input_min_tokens"),
        (lambda: trace_lengths("conv", 3), "rng is required"),
        (lambda: clip_lengths(np.ones(2), np.ones(2), 0, 5), "max_input_tokens"),
    ],
)
def test_invalid_arguments(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]
