"""What crosses the replica boundary: an engine's config, its status snapshot, slice entries.

EngineConfig is the typed configuration of one engine (simulated; the vLLM engine maps the shared
fields). The scheduler, profiler, simulator and replicas all speak these types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from shared.domain.request import Request
from shared.domain.scorpio import ScorpioConfig

GiB = 1 << 30


class EngineConfig(BaseModel):
    """Knobs of one engine instance. Defaults follow vLLM v1's online-serving defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["continuous", "static"] = "continuous"
    """continuous: iteration-level batching (vLLM); static: fixed batches with padding (HF/SLS)."""
    queue_policy: str = "fcfs"
    """Waiting-queue order, a name from the queue-policy registry."""
    block_size_tokens: int = Field(16, ge=1)
    """Tokens per paged KV block."""
    max_num_seqs: int = Field(256, ge=1)
    """Most sequences running at once."""
    max_num_batched_tokens: int = Field(8192, ge=1)
    """Per-step token budget shared by decodes and (chunked) prefills."""
    preemption_mode: Literal["recompute", "swap", "auto"] = "recompute"
    """How a preempted sequence gives back its KV: drop and recompute, swap to host memory, or
    whichever is cheaper (swap when PCIe transfer time < re-prefill time and the host has room)."""
    host_swap_bytes: int = Field(4 * GiB, ge=0)
    """Host memory for swapped-out KV (vLLM's swap_space)."""
    host_model_cache_bytes: int = Field(64 * GiB, ge=0)
    """Host memory for warm (CPU-tier) model weights."""
    static_batch_size: int = Field(16, ge=1)
    """Static mode: most requests per batch (memory may cap it lower)."""
    static_iteration_limit: int | None = Field(None, ge=1)
    """Static mode: decode iterations per batch (a slice); None runs until the longest finishes.
    Requests unfinished at the limit go back to the queue and re-prefill their context."""
    scorpio: ScorpioConfig | None = None
    """Continuous mode: SCORPIO's TTFT guard, VBS admission and credit batching (None: off)."""
    prefix_caching: bool = True
    """Continuous mode: automatic prefix caching (vLLM's default): a request's leading prompt
    blocks already cached are not prefilled again (services/replica/core/prefix_cache.py)."""
    adapter_slots: int = Field(1, ge=1)
    """LoRA adapters the engine holds at once (vLLM's max_loras); loading one more unloads
    the least recently used."""
    report_waiting_prefill: bool = False
    """On an earliest-deadline-first queue, list each waiting request's TTFT deadline and
    tokens in the engine's status (`EngineStatus.waiting_prefill`, read by the scheduler's
    deadline-aware TTFT guard). Off: the status counts them only, so a status read stays
    cheap with a long queue."""
    adapter_load_s: float = Field(0.0, ge=0)
    """Seconds the engine stalls to load a LoRA adapter it does not hold, before its next
    step (0: adapters cost nothing, the engine's default when no workload names one)."""


@dataclass(frozen=True, slots=True)
class SliceEntry:
    """A request handed to an engine for one slice of a pre-formed batch (SCLS/UELLM).

    output_tokens: tokens it generated in earlier slices (its context is prompt + these);
    first_token_s: when its first token came (None before its first slice).
    """

    request: Request
    output_tokens: int = 0
    first_token_s: float | None = None
    preemptions: int = 0


class RequestTooLarge(ValueError):
    """The request can never fit this instance's KV cache; reject it instead of queueing it."""


@dataclass(frozen=True, slots=True)
class EngineStatus:
    """A snapshot the replica reports to the scheduler."""

    active_model: str | None
    waiting: int
    running: int
    evicted: int
    kv_used_blocks: int
    kv_total_blocks: int
    outstanding_output_tokens: int
    """Output tokens still to generate (true lengths: meaningful to the simulator/oracle only)."""
    pending_prefill_tokens: int
    """Tokens whose KV is not computed yet (prompts, recompute after preemption, 1 per decode)."""
    waiting_prefill: tuple[tuple[float, int], ...] = ()
    """Per waiting request: (TTFT deadline on the engine's clock, seconds; its tokens not yet
    computed). Part of `pending_prefill_tokens`; empty where the engine does not report it."""
    deadline_ordered: bool = False
    """The engine serves waiting requests earliest TTFT deadline first (EDF queues): a new
    request waits only behind the waiting requests due before it."""
    loaded_adapters: tuple[str, ...] = ()
    """The LoRA adapters the engine holds now, least recently used first."""
    swapping: bool = False
    """A model swap runs: `active_model` is the model it loads (the one a request placed now
    is served on next), not ready yet."""
