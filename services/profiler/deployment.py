"""The profiler deployment: GetProfile / Estimate over the pure ProfileStore."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from ray import serve
from ray.serve import Application

from services.profiler.core.store import ProfileStore
from shared.domain import HardwareProfile
from shared.profiles.io import load_profiles
from shared.rpc.internal_http import internal_not_found
from shared.rpc.invalid_argument import request_or_refuse
from shared.rpc.mesh_auth import require_mesh_credential
from shared.rpc.slomesh.v1 import profiler_pb2
from shared.telemetry import TracingConfig, setup_tracing

_M = TypeVar("_M")


class ProfilerArgs(BaseModel):
    """Arguments of the profiler application."""

    model_config = ConfigDict(extra="forbid")

    tracing: TracingConfig = TracingConfig()
    """Span export."""
    profile_files: list[str] = Field(default_factory=list)
    """Profile files (`slomesh profile` output) registered in the store at start; their
    profiles answer before the roofline defaults."""


def build_store(args: ProfilerArgs) -> ProfileStore:
    """The store with every profile of args.profile_files registered (later files win)."""
    return ProfileStore(
        profiles=[p for path in args.profile_files for p in load_profiles(Path(path).expanduser())]
    )


def profile_msg(p: HardwareProfile) -> profiler_pb2.Profile:
    return profiler_pb2.Profile(
        gpu=p.gpu,
        model=p.model,
        tensor_parallel=p.tensor_parallel,
        prefill_coeffs_s=[p.prefill.p1, p.prefill.p2, p.prefill.p3, p.prefill.p4, p.prefill.p5],
        decode_coeffs_s=[p.decode.d1, p.decode.d2, p.decode.d3, p.decode.d4],
        kv_capacity_bytes=p.kv_capacity_bytes,
        kv_bytes_per_token=p.kv_bytes_per_token,
        weight_bytes=p.weight_bytes,
        swap_bytes_per_s=p.swap_bytes_s,
        cold_load_bytes_per_s=p.cold_load_bytes_s,
        inefficiency=p.inefficiency,
        source=p.source,
        submit_overhead_s=p.submit_overhead_s,
        delivery_overhead_s=p.delivery_overhead_s,
    )


@serve.deployment(max_ongoing_requests=4096, ray_actor_options={"num_cpus": 0.1})
class ProfilerDeployment:
    def __init__(self, args: dict[str, Any]) -> None:
        self.args = ProfilerArgs.model_validate(args)
        setup_tracing("profiler", self.args.tracing)
        self.store = build_store(self.args)

    async def __call__(self, request: Any) -> Any:
        """HTTP on this internal application's route prefix: 404 (shared/rpc/internal_http.py)."""
        return internal_not_found("profiler")

    def GetProfile(
        self, request: profiler_pb2.GetProfileRequest, grpc_context: Any = None
    ) -> profiler_pb2.Profile:
        require_mesh_credential(grpc_context, "profiler.GetProfile")
        try:
            prof = self.store.get(request.gpu, request.model, request.tensor_parallel or None)
        except ValueError as err:
            return _fail(grpc_context, err, profiler_pb2.Profile())
        return profile_msg(prof)

    def Estimate(
        self, request: profiler_pb2.EstimateRequest, grpc_context: Any = None
    ) -> profiler_pb2.EstimateReply:
        require_mesh_credential(grpc_context, "profiler.Estimate")
        req = request_or_refuse(request.meta, grpc_context, "profiler.Estimate")
        try:
            est = self.store.estimate(req, request.prediction, request.gpu)
        except ValueError as err:
            return _fail(grpc_context, err, profiler_pb2.EstimateReply())
        return profiler_pb2.EstimateReply(
            prefill_ms=est.prefill_s * 1e3,
            decode_ms_per_token=est.decode_s_per_token * 1e3,
            kv_bytes=est.kv_bytes,
            profile_source=est.profile_source,
        )


def _fail(grpc_context: Any, err: Exception, empty: _M) -> _M:
    if grpc_context is not None:
        import grpc

        grpc_context.set_code(grpc.StatusCode.NOT_FOUND)
        grpc_context.set_details(str(err))
    return empty


def build_app(args: dict[str, Any]) -> Application:
    """Serve application builder (`import_path: services.profiler.deployment:build_app`)."""
    parsed = ProfilerArgs.model_validate(args).model_dump(mode="json")
    app: Application = ProfilerDeployment.bind(parsed)  # type: ignore[attr-defined]
    return app
