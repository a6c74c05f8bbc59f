"""Typed configuration of one vLLM engine (maps onto vLLM 0.32's AsyncEngineArgs).

Cheap to import: it does not import vLLM. `engine_args_kwargs` gives the AsyncEngineArgs keyword
arguments; `VLLMEngine` adds the scheduler hook and sets the multiprocessing env var.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from services.replica.core.queue_policies import QUEUE_POLICIES
from services.replica.vllm.slo_metadata import hook_engine_kwargs
from shared.domain.scorpio import ScorpioConfig


class VLLMEngineConfig(BaseModel):
    """Knobs of one vLLM engine. The defaults suit a small model on CPU; GPUs raise the sizes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    """A local checkpoint directory or a Hugging Face model name (real checkpoints load through
    the same code on GPU machines; this project's CPU tests use `build_tiny_model`)."""
    served_model_name: str | None = None
    """The name reported as the active model (and by an OpenAI front end); None: `model`."""
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    """Weight and activation dtype; "auto" takes the checkpoint's (vLLM's CPU build prefers
    bfloat16/float32)."""
    max_model_len: int | None = Field(None, ge=1)
    """Most tokens (prompt + output) of one sequence; None: the model's maximum."""
    max_num_seqs: int = Field(16, ge=1)
    """Most sequences running at once (vLLM's batch size limit)."""
    max_num_batched_tokens: int | None = Field(None, ge=1)
    """Per-step token budget shared by decodes and (chunked) prefills; None: vLLM's default."""
    enforce_eager: bool = True
    """Run the model eagerly (no torch.compile / CUDA graphs): much faster start-up."""
    kv_cache_memory_bytes: int | None = Field(None, ge=1)
    """KV-cache size in bytes; None: vLLM's default (a fraction of device memory)."""
    gpu_memory_utilization: float = Field(0.9, gt=0.0, le=1.0)
    """Fraction of GPU memory vLLM may use (ignored when kv_cache_memory_bytes is set)."""
    tensor_parallel_size: int = Field(1, ge=1)
    """Tensor-parallel ranks (GPUs) per engine."""
    pipeline_parallel_size: int = Field(1, ge=1)
    """Pipeline-parallel stages per engine."""
    queue_policy: str = "fcfs"
    """Waiting-queue order, a name from the queue-policy registry. "fcfs" is vLLM's own default
    scheduler; any other name installs `SLOMeshScheduler` through vLLM's scheduler_cls hook."""
    multiprocessing: bool = False
    """VLLM_ENABLE_V1_MULTIPROCESSING: False runs the model in the engine-core process itself
    (CPU-friendly, starts in seconds); True adds vLLM's separate worker processes."""
    enable_prefix_caching: bool = True
    """Reuse KV blocks of shared prefixes (makes the re-prefill after evict/resume cheap)."""
    scorpio: ScorpioConfig | None = None
    """SCORPIO's credit batching (and VBS admission when `decode_coeffs` is set) inside vLLM's
    scheduler; None: off. Needs the scheduler hook, which it installs."""
    decode_coeffs: tuple[float, float, float, float] | None = None
    """Fitted decode-step coefficients (d1, d2, d3, d4) of this engine, in seconds (see
    shared/profiles/fit.py); enable SCORPIO's VBS admission. None: credit batching only."""
    enable_sleep_mode: bool = False
    """vLLM's sleep mode (CUDA builds only): a replica serving several models keeps each one's
    engine and swaps by sleep (weights to host memory) and wake instead of a restart."""
    temperature: float = Field(0.0, ge=0.0)
    """Sampling temperature of every request (0: greedy, deterministic)."""
    seed: int = 0
    """vLLM's random seed (sampling with temperature > 0)."""
    enable_lora: bool = False
    """Serve LoRA adapters over the base model (vLLM's `enable_lora`); the replica loads and
    unloads them at run time (services/replica/adapters.py)."""
    max_loras: int = Field(1, ge=1)
    """Adapters one engine step may run at once (vLLM's `max_loras`: the slots of the adapter
    weights on the device); the replica keeps at most this many loaded."""
    max_lora_rank: Literal[1, 8, 16, 32, 64, 128, 256, 320, 512] = 16
    """Largest adapter rank the engine accepts (vLLM's `max_lora_rank`, one of its sizes)."""
    max_cpu_loras: int | None = Field(None, ge=1)
    """Adapters vLLM caches in host memory (its `max_cpu_loras`, >= max_loras); None: vLLM's
    default (max_loras)."""
    engine_nice: int | None = Field(-10, ge=-20, le=19)
    """CPU priority (Linux nice, -20 highest .. 19 lowest) the replica gives every thread of
    vLLM's engine-core process once it has started, so the control plane's wake-ups on shared
    cores do not slow its steps (services/replica/vllm/cpu_priority.py). The mesh's other
    processes run at nice 0 (Ray's workers at their parent's, `RAY_worker_niceness`). A value
    below the current one needs CAP_SYS_NICE; without it the engine keeps its priority and the
    replica logs why. None: leave it."""
    mesh_sched_policy: Literal["batch", "idle"] | None = None
    """Linux scheduling class the replica gives the Ray node's other processes (the raylet and
    its workers: the mesh's control plane, the engine excepted) once the engine has started,
    and again a while later for workers started meanwhile (vllm/cpu_placement.py). "batch":
    their wake-ups never preempt the running engine, their CPU share is kept; "idle": they
    also run only when no other thread of the mesh wants the core. None: leave them."""
    engine_cpus: tuple[int, ...] | None = None
    """CPUs (ids) the replica pins the engine's main (model-running) thread to, keeping the Ray
    node's other processes on the remaining CPUs (all of them when none remain), so the control
    plane never runs on the engine's core; the engine's helper threads go where
    `engine_helpers` says (vllm/cpu_placement.py). None: no pinning."""
    engine_helpers: Literal["any", "rest", "engine"] = "any"
    """With `engine_cpus`, where the engine's helper threads (its socket threads, ZMQ's I/O
    thread) run: "any" CPU, the "rest" (the control plane's CPUs, at the engine's priority), or
    the "engine"'s own CPUs. They wake at every step's output; on the engine's core each
    wake-up preempts the model's thread. Without `engine_cpus` it has no effect."""
    engine_realtime: bool = False
    """With `engine_cpus`, run the engine's model thread in Linux's real-time class (SCHED_FIFO,
    lowest real-time priority) on its CPUs: no ordinary thread there (other sessions', a load
    generator's, the engine's own helpers') preempts it; it yields them only while it waits.
    Needs CAP_SYS_NICE (without it the replica logs the refusal and serves as before). Without
    `engine_cpus` it has no effect: an unpinned real-time engine could take every core."""
    engine_stats: bool = True
    """Run the engine core with vLLM's scheduler statistics on, for the replica's KV-cache use
    (the engine attaches them to every step's outputs: a cost per step in the engine's own
    process). Off: the engine runs as `vllm serve --disable-log-stats` does, and the replica
    counts the KV blocks of its live requests' prompts and outputs instead (prefix-cache hits
    not subtracted)."""
    report_waiting_prefill: bool = False
    """On an earliest-deadline-first queue, list each waiting request's TTFT deadline and
    prompt tokens in the replica's state (read by the scheduler's deadline-aware TTFT guard).
    Off: the state counts them only."""

    @field_validator("queue_policy")
    @classmethod
    def _known_policy(cls, name: str) -> str:
        QUEUE_POLICIES.check(name)
        return name

    @property
    def active_model(self) -> str:
        """The model name this engine reports."""
        return self.served_model_name or self.model

    @property
    def uses_scheduler_hook(self) -> bool:
        """Whether the waiting queue is ordered by a slomesh policy instead of vLLM's FCFS."""
        return self.queue_policy != "fcfs" or self.scorpio is not None

    def engine_args_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for vLLM's AsyncEngineArgs (the scheduler hook included)."""
        kwargs: dict[str, Any] = {
            "model": self.model,
            "served_model_name": self.served_model_name,
            "dtype": self.dtype,
            "max_model_len": self.max_model_len,
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "enforce_eager": self.enforce_eager,
            "kv_cache_memory_bytes": self.kv_cache_memory_bytes,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "tensor_parallel_size": self.tensor_parallel_size,
            "pipeline_parallel_size": self.pipeline_parallel_size,
            "enable_prefix_caching": self.enable_prefix_caching,
            "seed": self.seed,
        }
        if self.enable_lora:
            kwargs.update(
                enable_lora=True,
                max_loras=self.max_loras,
                max_lora_rank=self.max_lora_rank,
                max_cpu_loras=self.max_cpu_loras,
            )
        if self.enable_sleep_mode:
            kwargs["enable_sleep_mode"] = True
        if self.uses_scheduler_hook:
            scorpio = self.scorpio.model_dump() if self.scorpio is not None else None
            coeffs = list(self.decode_coeffs) if self.decode_coeffs is not None else None
            kwargs.update(hook_engine_kwargs(self.queue_policy, scorpio, coeffs))
        return {k: v for k, v in kwargs.items() if v is not None}
