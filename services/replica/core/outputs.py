"""Typed planner outputs (after vLLM v1's SchedulerOutput): what a step runs and what it made.

They are data only. A planner fills a StepPlan with the chunks it scheduled and the shape of the
forward pass (`work`); the engine core prices that shape on its hardware profile (`duration_s`).
Applying the finished step yields a StepResult.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from services.replica.core.sequence import Sequence


class StepKind(Enum):
    EXECUTE = "execute"  # a forward pass over the scheduled chunks
    LOAD_MODEL = "load_model"  # the instance is blocked while a model loads
    IDLE = "idle"  # nothing to do


@dataclass(frozen=True, slots=True)
class ScheduledChunk:
    """`num_tokens` new tokens of `seq` computed this step (prefill chunk, or 1 for decode)."""

    seq: Sequence
    num_tokens: int


@dataclass(frozen=True, slots=True)
class MixedStep:
    """A continuous-batching forward pass: chunked prefills and decodes together.

    The arguments of HardwareProfile.step_time_s: prefill tokens, prefilling sequences, the
    longest prefill context, decoding sequences and the sum of their contexts.
    """

    prefill_tokens: int
    prefill_seqs: int
    prefill_max_ctx: int
    decode_seqs: int
    decode_ctx: int
    prefill_attention: int = 0
    """Σ c·(k + c) over prefill chunks of c new tokens on k cached ones (attention's work)."""


@dataclass(frozen=True, slots=True)
class PaddedPrefill:
    """A static batch's prefill: `num_seqs` prompts padded to `padded_len` tokens."""

    num_seqs: int
    padded_len: int


@dataclass(frozen=True, slots=True)
class PaddedDecode:
    """One decode iteration of a static batch: every slot at the padded `context`."""

    context: int
    num_seqs: int


StepWork = MixedStep | PaddedPrefill | PaddedDecode
"""The shape of one forward pass, which the engine core times on its hardware profile."""


@dataclass(slots=True)
class StepPlan:
    """What one engine step will do (the planner) and how long it takes (the engine core)."""

    kind: StepKind
    start_s: float
    duration_s: float = 0.0
    chunks: list[ScheduledChunk] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    swapped_in_tokens: int = 0
    swapped_out_tokens: int = 0
    load_model: str | None = None
    kv_used_fraction: float = 0.0
    static_batch_end: bool = False
    rejected: list[tuple[Sequence, str]] = field(default_factory=list)
    """Waiting requests the engine's admission guard turned away, with the reason."""
    work: StepWork | None = None
    """EXECUTE steps: the forward pass to time (None for LOAD_MODEL and IDLE)."""

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s


@dataclass(slots=True)
class StepResult:
    """What a finished step produced: sequences that got a token, and those that finished."""

    end_s: float
    emitted: list[Sequence] = field(default_factory=list)
    finished: list[Sequence] = field(default_factory=list)
    sliced: list[Sequence] = field(default_factory=list)
    """Unfinished requests whose slice ended; they left the engine for the global pool."""
