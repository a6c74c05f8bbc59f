"""The scheduler application's arguments and the live view it builds from them.

SchedulerArgs is what a Serve config's `args` for the scheduler holds; live_replicas turns its
replica list into the admission core's LiveReplica views, each with its hardware profile
(measured profile files first, then the roofline catalogue).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from services.scheduler.core.autoscale.live import SignalConfig
from services.scheduler.core.leases import LeaseConfig
from services.scheduler.core.live_view import LiveReplica
from services.scheduler.core.qlm.length_estimates import hint_from_prediction
from services.scheduler.core.ttft_admission import TTFTAdmissionConfig
from services.scheduler.shard_peers import ShardConfig
from shared.domain import HardwareProfile, Request
from shared.profiles.defaults import default_profile
from shared.profiles.io import load_profiles
from shared.rpc.client import Transport
from shared.rpc.slomesh.v1 import common_pb2
from shared.telemetry import TracingConfig


class ReplicaEntry(BaseModel):
    """One replica the scheduler may place requests on."""

    model_config = ConfigDict(extra="forbid")

    application: str
    """Serve application name of the replica."""
    gpu: str
    """GPU type ("cpu" for CPU replicas)."""
    model: str
    """Served model name."""
    swap_models: list[str] = Field(default_factory=list)
    """Further models the replica may swap to (the replica's `swap_models`); empty: `model`
    for life."""
    node: str = ""
    """Node the replica runs on (informational)."""
    tensor_parallel: int = Field(1, ge=1)
    """GPUs of the replica."""
    pooled: bool = False
    """An autoscaled replica pool (services/replica/pool.py): several Serve replicas behind one
    application. Its admissions are released by reports only, never reconciled against a Status
    answer (each pool replica answers for the requests it holds itself)."""


class SchedulerArgs(BaseModel):
    """Arguments of the scheduler application."""

    model_config = ConfigDict(extra="forbid")

    policy: str = "qlm"
    """Global policy, a name from services/scheduler/core/policies.py (qlm, round-robin,
    least-loaded, oracle-ttft, batching)."""
    policy_options: dict[str, Any] = Field(default_factory=dict)
    """That policy's config (QLMConfig or BatchingConfig fields; none for routers)."""
    stack: str | None = None
    """Name reported with each decision (the serving stack `slomesh up --stack` ran);
    None: the policy name."""
    replicas: list[ReplicaEntry] = Field(min_length=1)
    """The replicas to place on."""
    transport: Transport = "handle"
    """How the scheduler calls replicas (Evict / Resume): Serve handles or the gRPC proxy."""
    grpc_host: str = "127.0.0.1"
    """Where the scheduler's own gRPC server listens (services/scheduler/own_server.py; mesh
    callers reach its methods there instead of over a Serve handle): an address, "node" (this
    Ray node's IP, for callers on other nodes), or "" (no own server: callers use the handle)."""
    max_in_flight_per_replica: int = Field(256, ge=1)
    """Admission limit per replica; beyond it requests are rejected with Retry-After."""
    max_num_seqs_per_replica: int = Field(8, ge=1)
    """Requests a replica's engine runs at once (queueing policies pull beyond it only into a
    short engine-side window)."""
    max_queued_requests: int = Field(10_000, ge=0)
    """Queueing policies (`qlm`): requests held in the global queue at most; beyond it arrivals
    are rejected with Retry-After."""
    max_queue_wait_ms: float | None = Field(None, gt=0)
    """Queueing policies: longest a request waits in the global queue (its TTFT deadline bounds
    it further); then it is answered 429 with Retry-After instead of being left to time out.
    None: only the TTFT deadline bounds it (`queue_reject_margin_ms` before it), so a class
    with a long TTFT SLO may wait in the queue as long as its SLO allows."""
    queue_reject_margin_ms: float = Field(100.0, ge=0)
    """A queued request is answered 429 once its TTFT deadline is closer than this: it could
    not get its first token in time anyway."""
    admit_lease_ms: float = Field(5000.0, gt=0)
    """An admission the replica does not hold this long after placement is released (its
    caller never started the stream or died mid-stream, so no report will come)."""
    reconcile_interval_ms: float = Field(1000.0, gt=0)
    """How often every replica's Status is asked: health, and admissions to reconcile."""
    status_timeout_ms: float = Field(1500.0, gt=0)
    """A Status probe slower than this fails."""
    failures_to_unhealthy: int = Field(2, ge=1)
    """Failed probes in a row that make a replica unhealthy (no placements or pulls) until it
    answers again."""
    swap_grace_factor: float = Field(2.5, ge=0)
    """A replica with a swap due is swapping, not lost, while it does not answer: its missed
    probes are excused for this many times the profile's swap time (weight bytes over cold
    load bandwidth) from the first of them (core/replica_health.py). An engine restart may
    starve the replica's event loop of CPU for seconds, and two restarts at once on a shared
    host take longer than the profile's one at a time. 0: a swap excuses nothing."""
    tick_interval_ms: float = Field(100.0, gt=0)
    """How often queueing policies are given the chance to pull and re-plan without a report."""
    tracing: TracingConfig = TracingConfig()
    """Span export."""
    rwt_log_file: str | None = None
    """Append one JSON line per scored waiting-time prediction here (qlm: predicted point,
    quantile and widened waits at admission, the measured wait to dispatch, groups queued);
    None: no log. `slomesh bench-agree` reads it."""
    report_log_file: str | None = None
    """Append one JSON line per completion report taken (request, replica, when its stream
    ended at the ingress and when the report reached the books; services/scheduler/report_log.py);
    None: no log. `slomesh bench-agree` reads it."""
    autoscale_signal: SignalConfig = SignalConfig()
    """How each model's load is measured for the autoscaler (AutoscaleSignal, read by replica
    pools' Serve autoscaling policy)."""
    ttft_guard: TTFTAdmissionConfig = TTFTAdmissionConfig()
    """The TTFT guard at admission (core/ttft_admission.py; off by default): a request whose
    first token is predicted late on every replica, from the replicas' reported queues
    (UpdateReplica pushes, Status answers) and profiles, is answered 429 before any engine."""
    leases: LeaseConfig = LeaseConfig()
    """Admission leases (core/leases.py): credits that let ingresses place requests without an
    Admit round trip while the cluster has headroom (`enabled`, `max_credits`, `ttl_ms`)."""
    shard: ShardConfig = ShardConfig()
    """This scheduler as one of several active-active shards (shard_peers.py): its name, its
    peers, the usage exchange's interval. Default: the one scheduler, named `scheduler`."""
    profile_files: list[str] = Field(default_factory=list)
    """Profile files (`slomesh profile` output, shared/profiles/io.py format) whose profiles
    replace the roofline defaults for matching (gpu, model, tensor_parallel) replicas."""


ProfileKey = tuple[str, str, int]


def load_profile_files(paths: list[str]) -> dict[ProfileKey, HardwareProfile]:
    """The profiles of `paths` by (gpu, model, tensor_parallel); a later file wins a key."""
    out: dict[ProfileKey, HardwareProfile] = {}
    for path in paths:
        for p in load_profiles(Path(path).expanduser()):
            out[(p.gpu, p.model, p.tensor_parallel)] = p
    return out


def _profile(
    gpu: str,
    model: str,
    tensor_parallel: int = 1,
    loaded: Mapping[ProfileKey, HardwareProfile] | None = None,
) -> HardwareProfile | None:
    """A loaded (measured) profile of the replica first, else the roofline default."""
    hit = (loaded or {}).get((gpu, model, tensor_parallel))
    if hit is not None:
        return hit
    try:
        return default_profile(gpu, model)
    except ValueError:
        return None  # not in the catalogue (e.g. the local CPU model): routers that need one say so


def with_length_hint(req: Request, prediction: common_pb2.LengthPrediction) -> Request:
    """`req` carrying the ingress's length prediction (made with the prompt), when it has one."""
    hint = hint_from_prediction(
        prediction.mean_tokens,
        list(prediction.bucket_upper_tokens),
        list(prediction.bucket_probs),
        req.max_tokens,
        prediction.predictor_version,
    )
    return req if hint is None else dataclasses.replace(req, length_hint=hint)


def live_replicas(args: SchedulerArgs) -> list[LiveReplica]:
    """The scheduler's view of its replicas, each with its profile (loaded files first)."""
    loaded = load_profile_files(args.profile_files)
    return [
        LiveReplica(
            r.application,
            r.gpu,
            r.model,
            _profile(r.gpu, r.model, r.tensor_parallel, loaded),
            max_num_seqs=args.max_num_seqs_per_replica,
            swap_profiles={m: _profile(r.gpu, m, r.tensor_parallel, loaded) for m in r.swap_models},
        )
        for r in args.replicas
    ]
