"""A replay trace: a seeded list of timed requests with exact input and output lengths.

Used to compare the simulated engine with a real one request by request (slomesh/sim/replay.py,
slomesh/sim/vllm_replay.py): both engines see the same arrivals and lengths, and the output
length is forced (the sim plays true_output_tokens; vLLM runs with ignore_eos).

Arrivals are a Poisson process; lengths are joint rows of the Azure conversation trace, scaled and
clipped to a small model's context: input round(in · input_scale) in [1, max_input_tokens], output
round(out · output_scale) in [2, max_output_tokens] (at least 2 so TPOT is defined), and the output
shortened so that input + output <= max_model_len. Draw order from np.random.default_rng(seed):
arrivals, then trace rows. Saved as JSONL, one request per line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from shared.domain import SLO, Request
from shared.workloads.arrivals import poisson_arrivals
from shared.workloads.length_samplers import trace_lengths

MIN_OUTPUT_TOKENS = 2


@dataclass(frozen=True, slots=True)
class TraceRequest:
    request_id: str
    arrival_s: float
    input_tokens: int
    output_tokens: int

    def __post_init__(self) -> None:
        if not self.arrival_s >= 0:
            raise ValueError(f"{self.request_id}: arrival_s must be >= 0, got {self.arrival_s}")
        if self.input_tokens < 1:
            raise ValueError(f"{self.request_id}: input_tokens must be >= 1")
        if self.output_tokens < 1:
            raise ValueError(f"{self.request_id}: output_tokens must be >= 1")


@dataclass(frozen=True, slots=True)
class TraceSpec:
    """How to draw a trace; the defaults suit the tiny CPU model (a run of well under a minute)."""

    requests: int = 80
    rate_rps: float = 2.0
    seed: int = 0
    max_model_len: int = 2048
    input_scale: float = 0.5
    output_scale: float = 0.5
    max_input_tokens: int = 1536
    max_output_tokens: int = 512

    def __post_init__(self) -> None:
        if self.requests < 1:
            raise ValueError(f"requests must be >= 1, got {self.requests}")
        if not self.rate_rps > 0:
            raise ValueError(f"rate_rps must be > 0, got {self.rate_rps}")
        if not (self.input_scale > 0 and self.output_scale > 0):
            raise ValueError("input_scale and output_scale must be > 0")
        if self.max_input_tokens + MIN_OUTPUT_TOKENS > self.max_model_len:
            raise ValueError(
                f"max_input_tokens ({self.max_input_tokens}) + {MIN_OUTPUT_TOKENS} must be <= "
                f"max_model_len ({self.max_model_len})"
            )
        if self.max_output_tokens < MIN_OUTPUT_TOKENS:
            raise ValueError(f"max_output_tokens must be >= {MIN_OUTPUT_TOKENS}")


TRACE_SHAPES: dict[str, dict[str, float | int]] = {
    "chat": {"input_scale": 0.25, "max_input_tokens": 256},
    "long": {"input_scale": 0.5, "max_input_tokens": 1500},
}
"""The fidelity traces: "chat", short chat-like prompts (Azure conv inputs x0.25, at most 256
tokens); "long", a long-prompt mix (Azure conv inputs x0.5, up to 1,500 tokens). Outputs are
Azure conv outputs x0.5 in both."""


def shaped_spec(shape: str, **kwargs: float | int) -> TraceSpec:
    """The TraceSpec of a named shape (TRACE_SHAPES), with `kwargs` for the rest."""
    if shape not in TRACE_SHAPES:
        raise ValueError(f"unknown trace shape {shape!r}; valid: {', '.join(TRACE_SHAPES)}")
    return TraceSpec(**{**kwargs, **TRACE_SHAPES[shape]})  # type: ignore[arg-type]


def concatenate(traces: Sequence[Sequence[TraceRequest]], gap_s: float) -> list[TraceRequest]:
    """One trace playing `traces` one after the other, `gap_s` apart (ids prefixed c<k>-)."""
    out: list[TraceRequest] = []
    offset = 0.0
    for k, trace in enumerate(traces):
        out += [
            TraceRequest(
                f"c{k}-{t.request_id}", t.arrival_s + offset, t.input_tokens, t.output_tokens
            )
            for t in trace
        ]
        offset = (out[-1].arrival_s if out else offset) + gap_s
    return out


def make_trace(spec: TraceSpec) -> list[TraceRequest]:
    """The trace of `spec`: same spec, same list (ids t000, t001, ... in arrival order)."""
    rng = np.random.default_rng(spec.seed)
    arrivals = poisson_arrivals(spec.rate_rps, spec.requests, rng)
    raw_in, raw_out = trace_lengths("conv", spec.requests, rng)
    inputs = np.clip(np.rint(raw_in * spec.input_scale), 1, spec.max_input_tokens).astype(int)
    outputs = np.clip(
        np.rint(raw_out * spec.output_scale), MIN_OUTPUT_TOKENS, spec.max_output_tokens
    ).astype(int)
    outputs = np.minimum(outputs, spec.max_model_len - inputs)
    width = max(3, len(str(spec.requests - 1)))
    return [
        TraceRequest(f"t{i:0{width}d}", float(a), int(n_in), int(n_out))
        for i, (a, n_in, n_out) in enumerate(zip(arrivals, inputs, outputs, strict=True))
    ]


def to_requests(trace: Sequence[TraceRequest], model: str) -> list[Request]:
    """Control-plane requests of a trace for `model`, output lengths forced (max = true)."""
    slo = SLO(ttft_deadline_s=1e9)
    return [
        Request(
            t.request_id,
            model,
            t.input_tokens,
            t.output_tokens,
            t.arrival_s,
            slo,
            true_output_tokens=t.output_tokens,
        )
        for t in trace
    ]


def save_trace(path: Path, trace: Sequence[TraceRequest]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(asdict(t)) + "\n" for t in trace))


def load_trace(path: Path) -> list[TraceRequest]:
    out = []
    for i, line in enumerate(path.read_text().splitlines()):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            out.append(
                TraceRequest(
                    str(d["request_id"]),
                    float(d["arrival_s"]),
                    int(d["input_tokens"]),
                    int(d["output_tokens"]),
                )
            )
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"{path}:{i + 1}: not a trace request: {err}") from None
    return out
