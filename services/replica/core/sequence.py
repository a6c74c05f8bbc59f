"""Per-request engine state, in the vocabulary of vLLM v1 (num_computed_tokens, num_tokens)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from shared.domain import Request


class SeqStatus(Enum):
    WAITING = "waiting"  # in the waiting queue (fresh, preempted by recompute, or swapped out)
    RUNNING = "running"  # holds GPU KV blocks and is scheduled every step
    BATCHED = "batched"  # a member of a pre-formed batch queued on a static engine (SCLS/UELLM)
    EVICTED = "evicted"  # taken out by an explicit evict(); waits for resume()
    FINISHED = "finished"
    ABORTED = "aborted"


class KVLocation(Enum):
    NONE = "none"  # nothing cached: the next schedule prefills prompt + generated tokens
    GPU = "gpu"
    CPU = "cpu"  # swapped out over PCIe; swapping back in restores num_computed_tokens


@dataclass(eq=False, slots=True)
class Sequence:
    """One request inside an engine.

    num_tokens = prompt + generated so far; num_computed_tokens have KV. A step schedules
    num_tokens - num_computed_tokens new tokens (a prefill chunk, or 1 for a decode); when all are
    computed the model samples one more token.
    """

    request: Request
    enqueue_s: float
    """When it reached this engine (its place in an FCFS line; the request's `arrival_s` is
    its arrival at the mesh, earlier by the hops and any global queue's wait)."""
    status: SeqStatus = SeqStatus.WAITING
    kv: KVLocation = KVLocation.NONE
    num_computed_tokens: int = 0
    num_output_tokens: int = 0
    gpu_blocks: int = 0
    cpu_tokens: int = 0
    first_token_s: float | None = None
    finish_s: float | None = None
    preemptions: int = 0
    key: tuple[float, ...] = field(default=())
    queue_token: int = -1  # identifies this sequence's live entry in the waiting heap
    cached_prompt_tokens: int = 0  # prompt tokens the prefix cache served when it was added
    slice_end_tokens: int | None = None  # continuous slice mode: leave at this many outputs

    @property
    def request_id(self) -> str:
        return self.request.request_id

    @property
    def model(self) -> str:
        return self.request.model

    @property
    def num_tokens(self) -> int:
        return self.request.input_tokens + self.num_output_tokens

    @property
    def target_output_tokens(self) -> int:
        return self.request.output_tokens_to_generate

    @property
    def remaining_output_tokens(self) -> int:
        return self.target_output_tokens - self.num_output_tokens

    @property
    def uncomputed_tokens(self) -> int:
        return self.num_tokens - self.num_computed_tokens

    @property
    def is_done(self) -> bool:
        return self.num_output_tokens >= self.target_output_tokens
