"""Turn a `WorkloadSpec` and a seed into a list of `Request`s, sorted by arrival.

- The total `requests` is split across streams proportionally to rate_rps (largest remainder, so the
  parts sum exactly; ties go to the earlier stream).
- Each stream draws from its own generator, child k of `np.random.SeedSequence(seed)`, so adding a
  stream at the end leaves the earlier streams' requests unchanged. Draw order within a stream:
  arrivals (for arrival='trace': the random start row), then lengths, then models.
- arrival='trace' replays the Azure trace's timestamps from a random start row (so seeds differ);
  when the stream's length source is the same trace, lengths are taken in order from that same row,
  keeping each real request's (arrival, input, output) together. The replay's rate is rate_rps
  over whole loops of the trace; a shorter window of a bursty trace runs faster or slower (e.g. a
  3,000-request window of "code" at 1 rps measured 1.35 rps).
- Streams are merged by arrival time (stable: ties keep stream order) and ids "r000000", "r000001",
  ... are assigned in arrival order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from shared.domain import SLO, Request
from shared.domain.prefix import PromptPrefix
from shared.workloads.arrivals import gamma_arrivals, poisson_arrivals, trace_arrivals
from shared.workloads.conversations import conversation_prompts
from shared.workloads.length_samplers import sample_lengths
from shared.workloads.slo_classes import get_slo_class
from shared.workloads.spec import StreamSpec, WorkloadSpec
from shared.workloads.traces import load_azure_trace


def split_requests(total: int, weights: Sequence[float]) -> list[int]:
    """Split `total` into non-negative ints proportional to `weights`, summing exactly to `total`.

    Largest-remainder (Hamilton) rounding: floors first, then one more to the largest fractional
    parts; equal fractions favour the earlier weight.
    """
    if total < 0:
        raise ValueError(f"total must be >= 0, got {total}")
    if len(weights) == 0:
        raise ValueError("weights must be non-empty")
    w = np.asarray(weights, dtype=np.float64)
    if not np.all(np.isfinite(w)) or np.any(w < 0) or not w.sum() > 0:
        raise ValueError(f"weights must be finite, >= 0 and not all 0, got {list(weights)}")
    quotas = total * w / w.sum()
    base = np.floor(quotas).astype(np.int64)
    short = total - int(base.sum())
    if short > 0:
        by_fraction = np.argsort(-(quotas - base), kind="stable")
        base[by_fraction[:short]] += 1
    return [int(x) for x in base]


def _stream_arrivals(
    stream: StreamSpec, n: int, rng: np.random.Generator
) -> tuple[NDArray[np.float64], int]:
    """Arrival times of one stream and the trace start row (0 unless arrival='trace')."""
    if stream.arrival == "poisson":
        return poisson_arrivals(stream.rate_rps, n, rng), 0
    if stream.arrival == "gamma":
        return gamma_arrivals(stream.rate_rps, stream.burstiness_cv, n, rng), 0
    trace = load_azure_trace(stream.trace)
    start = int(rng.integers(0, len(trace)))
    return trace_arrivals(trace.offsets_s, stream.rate_rps, n, start_index=start), start


def generate(spec: WorkloadSpec, seed: int) -> list[Request]:
    """The requests of `spec` for `seed` (an int >= 0): same seed, same list."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    streams = spec.streams
    counts = split_requests(spec.requests, [s.rate_rps for s in streams])
    children = np.random.SeedSequence(int(seed)).spawn(len(streams))

    times: list[NDArray[np.float64]] = []
    inputs: list[NDArray[np.int64]] = []
    outputs: list[NDArray[np.int64]] = []
    model_ids: list[NDArray[np.int64]] = []
    stream_ids: list[NDArray[np.int64]] = []
    model_table: list[str] = []
    slos: list[SLO] = []
    prefixes: list[PromptPrefix | None] = []
    adapters: list[str | None] = []
    for k, (stream, n, child) in enumerate(zip(streams, counts, children, strict=True)):
        rng = np.random.default_rng(child)
        arrivals, start = _stream_arrivals(stream, n, rng)
        in_order = stream.arrival == "trace" and stream.lengths.source == f"azure-{stream.trace}"
        inp, out = sample_lengths(stream.lengths, n, rng, in_order=in_order, start_index=start)
        picks = rng.integers(0, len(stream.models), size=n, dtype=np.int64)
        if stream.conversations is not None:
            turns, prefs = conversation_prompts(
                stream.conversations, out, stream.lengths.max_input_tokens, rng, k
            )
            inp = np.asarray(turns, dtype=np.int64)
            prefixes.extend(prefs)
        else:
            prefixes.extend([None] * n)
        if stream.adapters:
            chosen = rng.integers(0, len(stream.adapters), size=n, dtype=np.int64)
            adapters.extend(stream.adapters[j] for j in chosen.tolist())
        else:
            adapters.extend([None] * n)
        times.append(arrivals)
        inputs.append(inp)
        outputs.append(out)
        model_ids.append(picks + len(model_table))
        stream_ids.append(np.full(n, k, dtype=np.int64))
        model_table.extend(stream.models)
        slo = get_slo_class(stream.slo_class).to_slo()
        if stream.ttft_deadline_s is not None:
            slo = replace(slo, ttft_deadline_s=stream.ttft_deadline_s)
        slos.append(slo)

    all_times = np.concatenate(times)
    order = np.argsort(all_times, kind="stable")
    max_tokens = [s.lengths.max_tokens for s in streams]
    tenants = [s.tenant for s in streams]
    rows = zip(
        all_times[order].tolist(),
        np.concatenate(stream_ids)[order].tolist(),
        np.concatenate(model_ids)[order].tolist(),
        np.concatenate(inputs)[order].tolist(),
        np.concatenate(outputs)[order].tolist(),
        strict=True,
    )
    prefix_of = [prefixes[j] for j in order.tolist()]
    adapter_of = [adapters[j] for j in order.tolist()]
    return [
        Request(
            request_id=f"r{i:06d}",
            model=model_table[m],
            input_tokens=a,
            max_tokens=max_tokens[s],
            arrival_s=t,
            slo=slos[s],
            tenant=tenants[s],
            true_output_tokens=o,
            criticality=streams[s].criticality,
            prefix=prefix_of[i],
            adapter=adapter_of[i],
        )
        for i, (t, s, m, a, o) in enumerate(rows)
    ]
