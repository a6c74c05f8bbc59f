"""Length sources: n pairs (input_tokens, true_output_tokens) as two int64 arrays.

- `trace_lengths`: joint rows of an Azure trace (input and output stay paired, so their correlation
  is kept), sampled with replacement or taken in order (looping) when a stream replays the trace.
- `fixed_lengths`: the same pair for every request.
- `uniform_lengths`: inputs uniform in an inclusive range (e.g. QLM's 3,000-4,000-token "mega
  prompts" of workload WC), outputs sampled from a trace's output column.
- `sample_lengths`: dispatch on a `LengthSpec` and clip to its caps (every length >= 1).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from shared.workloads.spec import LengthSpec
from shared.workloads.traces import TraceName, load_azure_trace

Lengths = tuple[NDArray[np.int64], NDArray[np.int64]]


def _check_n(n: int) -> None:
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")


def trace_name_of(source: str) -> TraceName:
    """'azure-conv' -> 'conv', 'azure-code' -> 'code'."""
    if source == "azure-conv":
        return "conv"
    if source == "azure-code":
        return "code"
    raise ValueError(f"source must be azure-conv or azure-code, got {source!r}")


def trace_lengths(
    name: TraceName,
    n: int,
    rng: np.random.Generator | None = None,
    *,
    in_order: bool = False,
    start_index: int = 0,
) -> Lengths:
    """n (input, output) rows of Azure trace `name`.

    in_order=False: rows drawn uniformly with replacement using `rng` (required).
    in_order=True: rows start_index, start_index+1, ... wrapping around; `rng` is not used.
    """
    _check_n(n)
    trace = load_azure_trace(name)
    m = len(trace)
    if in_order:
        if not 0 <= start_index < m:
            raise ValueError(f"start_index must be in [0, {m}), got {start_index}")
        rows = np.arange(start_index, start_index + n, dtype=np.int64) % m
    else:
        if rng is None:
            raise ValueError("rng is required when in_order is False")
        rows = rng.integers(0, m, size=n, dtype=np.int64)
    return trace.input_tokens[rows].copy(), trace.output_tokens[rows].copy()


def fixed_lengths(input_tokens: int, output_tokens: int, n: int) -> Lengths:
    """n copies of (input_tokens, output_tokens)."""
    _check_n(n)
    if input_tokens < 1:
        raise ValueError(f"input_tokens must be >= 1, got {input_tokens}")
    if output_tokens < 1:
        raise ValueError(f"output_tokens must be >= 1, got {output_tokens}")
    return (
        np.full(n, input_tokens, dtype=np.int64),
        np.full(n, output_tokens, dtype=np.int64),
    )


def uniform_lengths(
    input_min_tokens: int,
    input_max_tokens: int,
    output_trace: TraceName,
    n: int,
    rng: np.random.Generator,
) -> Lengths:
    """Inputs uniform on the integers [input_min_tokens, input_max_tokens]; outputs sampled with
    replacement from the output column of `output_trace`."""
    _check_n(n)
    if input_min_tokens < 1:
        raise ValueError(f"input_min_tokens must be >= 1, got {input_min_tokens}")
    if input_min_tokens > input_max_tokens:
        raise ValueError(
            f"input_min_tokens must be <= input_max_tokens, got {input_min_tokens} > "
            f"{input_max_tokens}"
        )
    inputs = rng.integers(input_min_tokens, input_max_tokens, size=n, endpoint=True, dtype=np.int64)
    trace = load_azure_trace(output_trace)
    outputs = trace.output_tokens[rng.integers(0, len(trace), size=n, dtype=np.int64)].copy()
    return inputs, outputs


def clip_lengths(
    input_tokens: NDArray[np.int64],
    output_tokens: NDArray[np.int64],
    max_input_tokens: int,
    max_tokens: int,
) -> Lengths:
    """Clip inputs to [1, max_input_tokens] and outputs to [1, max_tokens]."""
    if max_input_tokens < 1:
        raise ValueError(f"max_input_tokens must be >= 1, got {max_input_tokens}")
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    return (
        np.clip(input_tokens, 1, max_input_tokens).astype(np.int64, copy=False),
        np.clip(output_tokens, 1, max_tokens).astype(np.int64, copy=False),
    )


def sample_lengths(
    spec: LengthSpec,
    n: int,
    rng: np.random.Generator,
    *,
    in_order: bool = False,
    start_index: int = 0,
) -> Lengths:
    """n clipped (input, true_output) pairs from the source `spec` describes.

    in_order/start_index only apply to the trace sources (see `trace_lengths`).
    """
    if spec.source in ("azure-conv", "azure-code"):
        raw = trace_lengths(
            trace_name_of(spec.source), n, rng, in_order=in_order, start_index=start_index
        )
    elif spec.source == "fixed":
        assert spec.input_tokens is not None and spec.output_tokens is not None  # validated
        raw = fixed_lengths(spec.input_tokens, spec.output_tokens, n)
    else:
        assert spec.input_min_tokens is not None and spec.input_max_tokens is not None
        raw = uniform_lengths(
            spec.input_min_tokens,
            spec.input_max_tokens,
            trace_name_of(spec.output_source),
            n,
            rng,
        )
    return clip_lengths(raw[0], raw[1], spec.max_input_tokens, spec.max_tokens)
