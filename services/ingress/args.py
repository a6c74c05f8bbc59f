"""The ingress application's arguments (the `args` of its Serve config entry)."""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from services.ingress.core.auth import APIKeyConfig
from services.ingress.core.batch_files import BatchConfig
from services.ingress.core.delivered import DeliveredGuardConfig
from services.ingress.core.entitlements import Entitlement
from services.ingress.core.front_door import FrontDoorConfig, is_loopback
from services.ingress.core.grpc_door import GrpcDoorConfig
from services.ingress.core.request_meta import AdmissionConfig
from services.ingress.core.slo import SLOPolicy, resolve_slo
from services.ingress.core.tenancy import TenancyConfig
from services.ingress.predictor_feed import PredictorFeedConfig
from services.ingress.shard_router import ShardRoutingConfig
from shared.domain.adapter import AdapterSpec, check_unique_names
from shared.rpc.client import Transport
from shared.telemetry import TracingConfig


class ServedModel(BaseModel):
    """A model the ingress accepts."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """Name clients put in `model`."""
    max_model_len: int = Field(4096, ge=2)
    """Context length in tokens (prompt + output)."""
    tokenizer: str | None = None
    """Tokenizer path/name for exact prompt token counts and chat templates; None: estimate
    tokens as ceil(1.3 x words) (the simulated engine's models)."""
    adapters: list[AdapterSpec] = Field(default_factory=list)
    """LoRA adapters of this model: a client names one as `model` (vLLM's convention) and the
    request runs on this model's replicas with the adapter loaded; `/v1/models` lists them
    (services/ingress/README.md, "LoRA adapters")."""


class IngressArgs(BaseModel):
    """Arguments of the ingress application."""

    model_config = ConfigDict(extra="forbid")

    models: list[ServedModel] = Field(min_length=1)
    """Served models."""
    transport: Transport = "handle"
    """How the ingress calls the other services: "handle" (Serve deployment handles, no proxy
    hop) or "grpc" (through Serve's gRPC proxy at grpc_target, which the mesh config must turn
    on: it is off by default). Same protobuf contracts."""
    grpc_target: str = "127.0.0.1:9000"
    """Serve's gRPC proxy, for transport "grpc"."""
    api_keys: APIKeyConfig = APIKeyConfig()
    """API keys (none required by default)."""
    slo: SLOPolicy = SLOPolicy()
    """SLO classes and limits."""
    admission: AdmissionConfig = AdmissionConfig()
    """max_tokens default and priority range."""
    tenancy: TenancyConfig = TenancyConfig()
    """Tenants from fairness headers, objectives (criticality bands), sheddable shedding."""
    tracing: TracingConfig = TracingConfig()
    """Span export."""
    call_timeout_s: float = Field(5.0, gt=0)
    """Deadline of each internal unary call (predict, report); past it the request fails
    fast with 503 instead of hanging."""
    num_replicas: int = Field(2, ge=1)
    """Ingress replicas. Two by default: a stream in flight through a replica that dies is cut
    with its HTTP connection (Serve's proxy holds it; no error event can follow), but new
    requests go to the survivor while Serve restarts the dead one."""
    max_ongoing_requests: int = Field(64, ge=1)
    """Requests (admission + streaming) one ingress replica serves at once; Serve's proxy holds
    the rest in its queue."""
    max_queued_at_proxy: int = Field(32, ge=1)
    """Requests Serve's HTTP proxy queues for the ingress beyond max_ongoing_requests; past it
    the proxy answers 429 with Retry-After itself, at once (its plain-text body, the cheapest
    rejection there is: under CPU overload the ingress may not get to run at all)."""
    max_admitting_requests: int = Field(1024, ge=1)
    """Requests this ingress replica holds in admission at once (predict + scheduler queue);
    beyond it new requests are answered 429 with Retry-After before any internal call."""
    delivered_guard: DeliveredGuardConfig = DeliveredGuardConfig()
    """Admission on what the mesh delivers now (core/delivered.py): a request whose TTFT or
    TPOT, predicted from the times this replica's streams measured at about the same load in
    the last seconds, misses its objective is answered 429 with Retry-After at once."""
    reject_hold_off_s: float = Field(0.25, ge=0)
    """After the scheduler rejects a request because its queue cannot take it
    (deadline-infeasible, queue-full, sheddable-saturated), requests with the same
    model, TTFT objective and band are answered 429 at once for this long (capped by that
    Retry-After), without a predictor or scheduler call (core/reject_gate.py); 0 disables."""
    accept_retries: int = Field(2, ge=0)
    """A stream its replica does not accept (no token sent yet) is admitted again this many
    times, within its TTFT deadline, before it fails with an error event."""
    replica_idle_timeout_s: float = Field(60.0, gt=0)
    """A replica stream that sends nothing for this long after its accept marker (a replica
    that hangs without dying) fails with an error event and is cancelled; seconds."""
    replica_accept_timeout_s: float = Field(3.0, gt=0)
    """A replica must accept a request's stream (its empty first chunk) this fast; otherwise
    the request fails with a clear error (a replica lost with its node)."""
    admit_timeout_s: float = Field(12.0, gt=0)
    """Deadline of scheduler.Admit, which may hold a request in the global queue: keep it above
    the scheduler's max_queue_wait_ms."""
    scheduler: ShardRoutingConfig = ShardRoutingConfig()
    """The scheduler shards requests are admitted through (shard_router.py): their
    application names, and whether to look for more. Default: the one `scheduler`."""
    predictor_feed: PredictorFeedConfig = PredictorFeedConfig()
    """Fast-path predictions and completions go to the predictor in batches (one
    predictor.Batch call per max_items or interval_ms; predictor_feed.py)."""
    batch: BatchConfig = BatchConfig()
    """The OpenAI Batch API (`/v1/files`, `/v1/batches`): SQLite storage directory, limits and
    how batch requests are run beside interactive traffic (`core/batch_files.py`)."""
    front_door: FrontDoorConfig = FrontDoorConfig()
    """The replicas' own HTTP server (core/front_door.py): the same API on
    front_door.host:front_door.port (127.0.0.1:8100), straight to an ingress replica without
    Serve's proxy hop; Serve's proxy (port 8000) keeps serving it too."""
    grpc_door: GrpcDoorConfig = GrpcDoorConfig()
    """The replicas' own gRPC server for the `Ingress` service (grpc_door.py), on
    grpc_door.host:grpc_door.port (127.0.0.1:9100); Serve's gRPC proxy is off by default."""
    allow_unauthenticated_public_listeners: bool = False
    """Let front_door or grpc_door listen beyond loopback while api_keys.required is false.
    The risk: anyone who can reach the address generates on your GPUs, reads the Batch API's
    files of the anonymous tenant and spends everyone's capacity. Without it such a config is
    refused at start (`slomesh up` checks Serve's proxies the same way)."""

    @model_validator(mode="after")
    def _tenancy_knows_the_keys(self) -> Self:
        """Key tenants are reserved from the fairness headers (anonymous callers naming one
        get 403), and no default SLO (the policy's, a key's default class) is tighter than the
        entitlement that gets it: defaults never earn a 403."""
        reserved = self.tenancy.reserved_tenants | self.api_keys.tenants()
        if reserved != self.tenancy.reserved_tenants:
            self.tenancy = self.tenancy.model_copy(update={"reserved_tenants": reserved})
        checks: list[tuple[str, Entitlement, str | None]] = [
            (w, e, None) for w, e in self.tenancy.entitlements().items()
        ]
        for entry in self.api_keys.keys.values():
            where = f"api_keys tenant '{entry.tenant}'"
            checks.append((where, entry.entitlement, entry.default_class))
        for where, ent, default_class in checks:
            if default_class is not None and default_class not in self.slo.classes:
                continue  # reported by api_keys.check_classes at start-up
            ent.check_slo(resolve_slo(None, {}, default_class, self.slo), where)
        return self

    @model_validator(mode="after")
    def _names_are_unique(self) -> Self:
        """A client's `model` names exactly one model or adapter."""
        check_unique_names(
            [m.name for m in self.models], [a for m in self.models for a in m.adapters]
        )
        return self

    @model_validator(mode="after")
    def _no_open_public_doors(self) -> Self:
        if self.api_keys.required or self.allow_unauthenticated_public_listeners:
            return self
        public = [
            f"{name}.host {door.host!r}"
            for name, door in (("front_door", self.front_door), ("grpc_door", self.grpc_door))
            if door.enabled and not is_loopback(door.host)
        ]
        if public:
            raise ValueError(
                f"{' and '.join(public)} listen beyond loopback but api_keys.required is "
                "false, so anyone who reaches them can generate: set api_keys (required: "
                "true), bind 127.0.0.1, or set allow_unauthenticated_public_listeners: true"
            )
        return self
