"""A replica's arguments (its Serve application's `args`): engine, model, limits, adapters,
serving options and the models it may swap to."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from services.replica.adapters import ReplicaAdapters
from services.replica.limits import ReplicaLimits
from services.replica.model_swap import SwapModelArgs
from services.replica.state_push import StatePushArgs
from services.replica.vllm.openai_app import ServingOptions
from shared.domain.engine import EngineConfig
from shared.telemetry import TracingConfig


class ModelTiersArgs(BaseModel):
    """The deployer's model-tier plan of one replica (QLM model swapping)."""

    model_config = ConfigDict(extra="forbid")

    active: str
    """Model loaded on the GPUs at start (the replica's served model)."""
    warm: list[str] = Field(default_factory=list)
    """Models staged in host memory at start (swap in at PCIe speed)."""
    cold: list[str] = Field(default_factory=list)
    """Models the replica may load from storage."""
    host_budget_bytes: int = Field(ge=0)
    """Host memory this replica may use for warm models, bytes."""


class ReplicaArgs(BaseModel):
    """Arguments of one replica application (the `args` of its Serve config entry)."""

    model_config = ConfigDict(extra="forbid")

    application: str = "replica-0"
    """This replica's Serve application name (how the scheduler addresses it)."""
    engine: Literal["simulated", "vllm"] = "simulated"
    """Engine kind."""
    model: str = "llama-3.1-8b"
    """Served model name (what clients put in `model`)."""
    gpu: str = "A100-80GB"
    """GPU type; the simulated engine takes its step times from this GPU's profile."""
    tensor_parallel: int = Field(1, ge=1)
    """GPUs of each pipeline stage (vLLM tensor_parallel_size unless `vllm` sets it)."""
    pipeline_parallel: int = Field(1, ge=1)
    """Pipeline stages (vLLM pipeline_parallel_size unless `vllm` sets it); the deployer's HELR
    planner puts the layer split in VLLM_PP_LAYER_PARTITION of the application's runtime_env."""
    swap_models: dict[str, SwapModelArgs] = Field(default_factory=dict)
    """Further models this replica may serve, by served name: it starts on `model` and swaps
    its engine to another on demand (model_host.py: running requests finish first; vLLM
    restarts, or wakes the model's sleeping engine with `vllm.enable_sleep_mode`). Empty:
    `model` only, for the replica's life."""
    model_tiers: ModelTiersArgs | None = None
    """Simulated engine: the models it may swap between and which start warm; None: `model`
    only."""
    step_time_scale: float = Field(1.0, ge=0.0)
    """Simulated engine: multiply profiled step times (0: zero-time steps, for overhead runs)."""
    engine_config: EngineConfig = EngineConfig()
    """Simulated engine settings."""
    vllm: dict[str, Any] = Field(default_factory=dict)
    """vLLM engine settings (services.replica.vllm.config.VLLMEngineConfig fields)."""
    tracing: TracingConfig = TracingConfig()
    """Span export."""
    limits: ReplicaLimits = ReplicaLimits()
    """Request limits enforced here as at the ingress (services/replica/limits.py)."""
    stream_interval_ms: float = Field(50.0, ge=0.0)
    """Tokens after the first go out coalesced, at most one message per this many ms per
    stream (the first token and the end at once; vLLM's OpenAI answers byte for byte in fewer
    messages: services/replica/response_pieces.py; engine streams: streaming.py). 0: one
    message per wake-up with whatever is ready. Each message costs CPU in the replica and the
    ingress on cores the engines share; Ray Serve LLM batches its streams on the same 50 ms.
    Time to first token and the time per output token from first to last are unchanged; only
    the tokens in between arrive in bursts."""
    output_gather_share: float = Field(0.5, ge=0.0, le=1.0)
    """vLLM answers: the share of `stream_interval_ms` over which vLLM's own output processor
    gathers a stream's tokens into one output (each request's vLLM `stream_interval`, from the
    time per token measured on this replica: services/replica/vllm/output_pace.py). vLLM's
    front end then does its per-output work (a response chunk, its JSON, a wake-up) once per
    gathered output instead of once per token. 0: one output per token (vLLM's default)."""
    grpc_host: str = "127.0.0.1"
    """Where this replica's own gRPC server listens (direct_server.py; callers stream from it
    instead of relaying through a Serve handle): an address, "node" (this Ray node's IP, for
    callers on other nodes), or "" (no own server: callers use the Serve handle)."""
    max_ongoing_requests: int = Field(1024, ge=1)
    """Serve's admission limit for this replica (never Serve's default of 5)."""
    push_state: StatePushArgs = StatePushArgs()
    """Pushing the engine state to the scheduler's UpdateReplica (state_push.py; off by
    default): the scheduler's TTFT guard predicts from it."""
    serving: ServingOptions = ServingOptions()
    """This model's options of vLLM's OpenAI serving layer (chat template, tool and reasoning
    parsers: `vllm serve`'s flags of the same names)."""
    tokenizer_model: str = "~/.cache/slomesh/models/tiny-llama"
    """Simulated engine: the model directory whose tokenizer, chat template and config vLLM's
    serving layer uses for the simulated model (`slomesh build-tiny-model` builds it)."""
    max_model_len: int = Field(8192, ge=16)
    """Simulated engine: the context length served, tokens (vLLM takes its own from
    `vllm.max_model_len`)."""
    adapters: ReplicaAdapters = ReplicaAdapters()
    """LoRA adapters served over the model, loaded on demand (services/replica/adapters.py)."""
