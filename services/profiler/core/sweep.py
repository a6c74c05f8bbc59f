"""The sweep plan: which controlled batches to run against an engine to fit its profile.

shared/README.md (SCLS §4.2-4.3, QLM §6 "hardware profiling"): the bilinear step-time models
    T_prefill(N, L)   = p1·N·L + p2·N + p3·L + p4
    tau_decode(l, N)  = d1·N·l + d2·N + d3·l + d4
are fitted on measured steps. The plan crosses a set of batch sizes N with a set of lengths
(prompt length L for prefill, context l for decode), so N and L vary independently and the
design [N·L, N, L, 1] has full rank (fit.py checks it again on the measurements).

Every point is sized to the engine's limits so that it measures what it claims to:
- prefill point (N, L): N requests of L prompt tokens and max_tokens = 1, arriving together,
  prefilled in ONE step: N <= max_num_seqs, N·L <= max_num_batched_tokens, L + 1 <= max_model_len
  and the N sequences fit the KV cache (whole blocks of block_size_tokens);
- decode point (N, l, S): N requests of l prompt tokens prefilled together in one step, then S
  decode-only steps at contexts l+1 .. l+S: the same limits with length l + S + 1, so no request
  is ever preempted.
A point outside the limits is dropped; a plan whose remaining points cannot identify the four
coefficients is an error naming the limit that removed too much.

The ε run (QLM Eq. 4/15) is a short mixed-length continuous-batching workload: requests with
seeded random prompt and output lengths, all arriving at once (see inefficiency.py).

Runs are executed in a seeded shuffled order, repeats interleaved, so slow drift of a shared
machine spreads over all points instead of biasing the last ones.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

N_COEFFS = 4


@dataclass(frozen=True, slots=True)
class EngineLimits:
    """What one engine instance can run (read from the engine after it started)."""

    max_num_seqs: int
    """Most sequences running at once."""
    max_num_batched_tokens: int
    """Per-step token budget."""
    kv_capacity_tokens: int
    """Tokens the KV cache holds (allocated blocks x block size)."""
    max_model_len: int
    """Most tokens (prompt + output) of one sequence."""
    block_size_tokens: int
    """Tokens per KV block (KV is allocated in whole blocks)."""

    def __post_init__(self) -> None:
        for name in (
            "max_num_seqs",
            "max_num_batched_tokens",
            "kv_capacity_tokens",
            "max_model_len",
            "block_size_tokens",
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"EngineLimits.{name} must be an int >= 1, got {v!r}")

    def kv_fits(self, n: int, tokens_per_seq: int) -> bool:
        """Whether n sequences of tokens_per_seq tokens fit the KV cache in whole blocks."""
        blocks = math.ceil(tokens_per_seq / self.block_size_tokens)
        return n * blocks <= self.kv_capacity_tokens // self.block_size_tokens


class SweepSettings(BaseModel):
    """The knobs of a sweep; `QUICK` and `FULL` are the presets of `slomesh profile`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    batch_sizes: tuple[int, ...] = Field(min_length=2)
    """Candidate batch sizes N (those above the engine's max_num_seqs are dropped)."""
    prefill_lengths_tokens: tuple[int, ...] = Field(min_length=2)
    """Candidate prompt lengths L of the prefill points."""
    decode_contexts_tokens: tuple[int, ...] = Field(min_length=2)
    """Candidate prompt lengths l of the decode points (decode step k runs at context l + k)."""
    decode_steps: int = Field(8, ge=1)
    """Decode-only steps timed per decode run."""
    prefill_repeats: int = Field(3, ge=1)
    """Runs of every prefill point (the fit uses the median step time)."""
    decode_repeats: int = Field(2, ge=1)
    """Runs of every decode point (median over repeats x decode_steps step times)."""
    mixed_requests: int = Field(32, ge=0)
    """Requests of the ε run (0: skip it, ε = 1)."""
    mixed_repeats: int = Field(3, ge=1)
    """Runs of the ε workload (ε uses the median run time: one short run is at the mercy of
    a burst of contention)."""
    mixed_max_input_tokens: int = Field(512, ge=1)
    """Largest prompt of the ε run (uniform in [mixed_min_input_tokens, this])."""
    mixed_min_input_tokens: int = Field(16, ge=1)
    """Smallest prompt of the ε run."""
    mixed_max_output_tokens: int = Field(64, ge=1)
    """Largest output of the ε run (uniform in [mixed_min_output_tokens, this])."""
    mixed_min_output_tokens: int = Field(8, ge=1)
    """Smallest output of the ε run."""
    seed: int = 0
    """Seed of the run order and of the ε run's lengths."""


QUICK = SweepSettings(
    batch_sizes=(1, 2, 4, 8, 16),
    prefill_lengths_tokens=(16, 64, 256, 512, 1024),
    decode_contexts_tokens=(64, 256, 512, 1024),
    decode_steps=8,
    prefill_repeats=3,
    decode_repeats=2,
    mixed_requests=32,
)
"""Finishes in well under 2 minutes on vLLM's CPU build with the tiny model."""

FULL = SweepSettings(
    batch_sizes=(1, 2, 4, 8, 16, 32, 64, 128, 256),
    prefill_lengths_tokens=(16, 32, 64, 128, 256, 512, 1024, 2048, 4096),
    decode_contexts_tokens=(64, 128, 256, 512, 1024, 2048, 4096),
    decode_steps=16,
    prefill_repeats=5,
    decode_repeats=3,
    mixed_requests=128,
    mixed_max_input_tokens=1024,
    mixed_max_output_tokens=256,
)
"""A denser grid (more repeats, larger batches where the engine allows them)."""

PRESETS: dict[str, SweepSettings] = {"quick": QUICK, "full": FULL}


@dataclass(frozen=True, slots=True)
class PrefillPoint:
    """n requests of `length` prompt tokens (max_tokens 1), prefilled in one step."""

    n: int
    length: int


@dataclass(frozen=True, slots=True)
class DecodePoint:
    """n requests of `context` prompt tokens, prefilled together, then `steps` decode steps."""

    n: int
    context: int
    steps: int

    @property
    def mean_context(self) -> float:
        """Mean context of the timed steps: step k (1..steps) runs at context + k."""
        return self.context + (self.steps + 1) / 2


@dataclass(frozen=True, slots=True)
class MixedRequest:
    """One request of the ε run."""

    input_tokens: int
    output_tokens: int


Run = tuple[Literal["prefill"], PrefillPoint] | tuple[Literal["decode"], DecodePoint]


@dataclass(frozen=True, slots=True)
class SweepPlan:
    """The points to measure, the order to run them in, and the ε run's requests."""

    limits: EngineLimits
    prefill: tuple[PrefillPoint, ...]
    decode: tuple[DecodePoint, ...]
    runs: tuple[Run, ...]
    """Every prefill/decode run (repeats included) in execution order."""
    mixed: tuple[MixedRequest, ...]
    mixed_repeats: int
    warmup: tuple[Run, ...]
    """Untimed runs first (the smallest and largest prefill, one decode) to warm the engine."""


def _identifiable(kind: str, pairs: list[tuple[int, int]], limits: EngineLimits) -> None:
    ns = sorted({n for n, _ in pairs})
    xs = sorted({x for _, x in pairs})
    if len(pairs) >= N_COEFFS:
        n = np.array([p[0] for p in pairs], dtype=np.float64)
        x = np.array([p[1] for p in pairs], dtype=np.float64)
        design = np.column_stack([n * x, n, x, np.ones(len(pairs))])
        if int(np.linalg.matrix_rank(design / np.abs(design).max(axis=0))) == N_COEFFS:
            return
    raise ValueError(
        f"sweep plan: the {kind} points left within the engine limits ({len(pairs)} points, "
        f"batch sizes {ns}, lengths {xs}) cannot identify the 4 coefficients (the design "
        f"[N·L, N, L, 1] needs rank 4: 2+ batch sizes x 2+ lengths, varied independently); "
        f"limits: max_num_seqs={limits.max_num_seqs}, max_num_batched_tokens="
        f"{limits.max_num_batched_tokens}, kv_capacity_tokens={limits.kv_capacity_tokens}, "
        f"max_model_len={limits.max_model_len}"
    )


def prefill_fits(limits: EngineLimits, n: int, length: int) -> bool:
    """Whether prefill point (n, length) runs as one step within `limits` (module docstring)."""
    return (
        n <= limits.max_num_seqs
        and n * length <= limits.max_num_batched_tokens
        and length + 1 <= limits.max_model_len
        and limits.kv_fits(n, length + 1)
    )


def decode_fits(limits: EngineLimits, n: int, context: int, steps: int) -> bool:
    """Whether decode point (n, context, steps) prefills in one step and never preempts."""
    total = context + steps + 1
    return (
        n <= limits.max_num_seqs
        and n * context <= limits.max_num_batched_tokens
        and total <= limits.max_model_len
        and limits.kv_fits(n, total)
    )


def _mixed(settings: SweepSettings, limits: EngineLimits, rng: random.Random) -> list[MixedRequest]:
    lo_in = min(settings.mixed_min_input_tokens, settings.mixed_max_input_tokens)
    lo_out = min(settings.mixed_min_output_tokens, settings.mixed_max_output_tokens)
    hi_out = settings.mixed_max_output_tokens
    # each request must fit max_model_len; KV pressure is allowed (preemption is part of ε)
    hi_in = min(settings.mixed_max_input_tokens, limits.max_model_len - hi_out)
    if hi_in < lo_in:
        raise ValueError(
            f"sweep plan: mixed_max_output_tokens={hi_out} leaves no room for a prompt of "
            f">= {lo_in} tokens within max_model_len={limits.max_model_len}"
        )
    out = []
    for _ in range(settings.mixed_requests):
        out.append(MixedRequest(rng.randint(lo_in, hi_in), rng.randint(lo_out, hi_out)))
    return out


def plan_sweep(limits: EngineLimits, settings: SweepSettings = QUICK) -> SweepPlan:
    """The sweep of `settings` sized to `limits` (module docstring); ValueError if it cannot
    identify the coefficients within the limits."""
    ns = sorted(set(settings.batch_sizes))
    if ns[0] < 1:
        raise ValueError(f"sweep settings: batch_sizes must be >= 1, got {ns}")
    for name in ("prefill_lengths_tokens", "decode_contexts_tokens"):
        if min(getattr(settings, name)) < 1:
            raise ValueError(f"sweep settings: {name} must be >= 1")
    prefill = [
        PrefillPoint(n, length)
        for n in ns
        for length in sorted(set(settings.prefill_lengths_tokens))
        if prefill_fits(limits, n, length)
    ]
    steps = settings.decode_steps
    decode = [
        DecodePoint(n, ctx, steps)
        for n in ns
        for ctx in sorted(set(settings.decode_contexts_tokens))
        if decode_fits(limits, n, ctx, steps)
    ]
    _identifiable("prefill", [(p.n, p.length) for p in prefill], limits)
    _identifiable("decode", [(p.n, p.context) for p in decode], limits)
    rng = random.Random(settings.seed)
    runs: list[Run] = []
    for r in range(max(settings.prefill_repeats, settings.decode_repeats)):
        batch: list[Run] = []
        if r < settings.prefill_repeats:
            batch += [("prefill", p) for p in prefill]
        if r < settings.decode_repeats:
            batch += [("decode", p) for p in decode]
        rng.shuffle(batch)
        runs += batch
    smallest = min(prefill, key=lambda p: p.n * p.length)
    largest = max(prefill, key=lambda p: p.n * p.length)
    warmup: tuple[Run, ...] = (
        ("prefill", smallest),
        ("prefill", largest),
        ("decode", max(decode, key=lambda p: p.n * p.context)),
    )
    return SweepPlan(
        limits=limits,
        prefill=tuple(prefill),
        decode=tuple(decode),
        runs=tuple(runs),
        mixed=tuple(_mixed(settings, limits, rng)),
        mixed_repeats=settings.mixed_repeats,
        warmup=warmup,
    )


def required_batched_tokens(settings: SweepSettings, max_num_seqs: int, max_model_len: int) -> int:
    """The step token budget the largest point of `settings` needs within these limits (the
    vLLM driver raises the engine's max_num_batched_tokens to it)."""
    ns = [n for n in settings.batch_sizes if n <= max_num_seqs] or [1]
    lengths = [*settings.prefill_lengths_tokens, *settings.decode_contexts_tokens]
    longest = max([x for x in lengths if x < max_model_len] or [1])
    return max(ns) * longest
