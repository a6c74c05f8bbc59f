"""Exposure check: call every internal RPC through Serve's gRPC proxy without the mesh credential
(expect UNAUTHENTICATED) and with it (expect anything but UNAUTHENTICATED), and list which
ports the mesh's processes listen on. Run against a running `slomesh up` whose config turns
Serve's gRPC proxy on (`grpc_options.grpc_servicer_functions`; it is off by default, and then
no internal service answers gRPC outside the replicas' own servers, which require the credential
too: services/ingress/README.md, "Listeners").

    .venv/bin/python loadtest/exposure.py [--target 127.0.0.1:9000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import grpc

from shared.rpc.mesh_auth import MESH_TOKEN_ENV, MESH_TOKEN_METADATA
from shared.rpc.slomesh.v1 import (
    common_pb2,
    deployer_pb2,
    deployer_pb2_grpc,
    predictor_pb2,
    predictor_pb2_grpc,
    profiler_pb2,
    profiler_pb2_grpc,
    replica_pb2,
    replica_pb2_grpc,
    scheduler_pb2,
    scheduler_pb2_grpc,
)


def _calls() -> list[tuple[str, str, Any, str, Any, bool]]:
    meta = common_pb2.RequestMeta(
        request_id=f"exposure-{int(time.time())}",
        model="llama-3.1-8b",
        input_tokens=4,
        max_tokens=100000,
        priority=-1000,
    )
    rep = common_pb2.ReplicaRef(application="replica-0")
    return [
        (
            "replica-0",
            "replica.Generate",
            replica_pb2_grpc.ReplicaStub,
            "Generate",
            replica_pb2.ReplicaGenerateRequest(meta=meta, prompt="hi"),
            True,
        ),
        (
            "replica-0",
            "replica.Evict",
            replica_pb2_grpc.ReplicaStub,
            "Evict",
            replica_pb2.RequestIds(request_ids=["x"]),
            False,
        ),
        (
            "replica-0",
            "replica.Resume",
            replica_pb2_grpc.ReplicaStub,
            "Resume",
            replica_pb2.RequestIds(request_ids=["x"]),
            False,
        ),
        (
            "replica-0",
            "replica.Status",
            replica_pb2_grpc.ReplicaStub,
            "Status",
            replica_pb2.StatusQuery(),
            False,
        ),
        (
            "replica-0",
            "replica.SwapModel",
            replica_pb2_grpc.ReplicaStub,
            "SwapModel",
            replica_pb2.ModelSwapOrder(model=meta.model),  # not served here: refused, no swap
            False,
        ),
        (
            "scheduler",
            "scheduler.Admit",
            scheduler_pb2_grpc.SchedulerStub,
            "Admit",
            scheduler_pb2.AdmitRequest(meta=meta),
            False,
        ),
        (
            "scheduler",
            "scheduler.Report",
            scheduler_pb2_grpc.SchedulerStub,
            "Report",
            scheduler_pb2.CompletionReport(meta=meta, replica=rep),
            False,
        ),
        (
            "scheduler",
            "scheduler.UpdateReplica",
            scheduler_pb2_grpc.SchedulerStub,
            "UpdateReplica",
            common_pb2.ReplicaState(replica=rep),
            False,
        ),
        (
            "scheduler",
            "scheduler.Lease",
            scheduler_pb2_grpc.SchedulerStub,
            "Lease",
            scheduler_pb2.LeaseRequest(ingress_id="exposure"),
            False,
        ),
        (
            "scheduler",
            "scheduler.Place",
            scheduler_pb2_grpc.SchedulerStub,
            "Place",
            scheduler_pb2.PlaceNotice(
                ingress_id="exposure", admit=scheduler_pb2.AdmitRequest(meta=meta), replica=rep
            ),
            False,
        ),
        (
            "scheduler",
            "scheduler.Sync",
            scheduler_pb2_grpc.SchedulerStub,
            "Sync",
            scheduler_pb2.SyncBatch(ingress_id="exposure"),
            False,
        ),
        (
            "scheduler",
            "scheduler.Health",
            scheduler_pb2_grpc.SchedulerStub,
            "Health",
            scheduler_pb2.HealthQuery(),
            False,
        ),
        (
            "scheduler",
            "scheduler.Exchange",
            scheduler_pb2_grpc.SchedulerStub,
            "Exchange",
            scheduler_pb2.ShardUsage(),  # no shard named: taken as no peer's report
            False,
        ),
        (
            "predictor",
            "predictor.Predict",
            predictor_pb2_grpc.PredictorStub,
            "Predict",
            predictor_pb2.PredictRequest(meta=meta),
            False,
        ),
        (
            "predictor",
            "predictor.Observe",
            predictor_pb2_grpc.PredictorStub,
            "Observe",
            predictor_pb2.Observation(meta=meta, output_tokens=3),
            False,
        ),
        (
            "predictor",
            "predictor.Batch",
            predictor_pb2_grpc.PredictorStub,
            "Batch",
            predictor_pb2.PredictorBatch(
                items=[
                    predictor_pb2.PredictorWork(
                        observe=predictor_pb2.Observation(meta=meta, output_tokens=3)
                    )
                ]
            ),
            False,
        ),
        (
            "profiler",
            "profiler.GetProfile",
            profiler_pb2_grpc.ProfilerStub,
            "GetProfile",
            profiler_pb2.GetProfileRequest(),
            False,
        ),
        (
            "profiler",
            "profiler.Estimate",
            profiler_pb2_grpc.ProfilerStub,
            "Estimate",
            profiler_pb2.EstimateRequest(),
            False,
        ),
        (
            "deployer",
            "deployer.Plan",
            deployer_pb2_grpc.DeployerStub,
            "Plan",
            deployer_pb2.PlanRequest(),
            False,
        ),
        (
            "deployer",
            "deployer.Apply",
            deployer_pb2_grpc.DeployerStub,
            "Apply",
            deployer_pb2.PlanRequest(),
            False,
        ),
        (
            "deployer",
            "deployer.Status",
            deployer_pb2_grpc.DeployerStub,
            "Status",
            deployer_pb2.StatusRequest(),
            False,
        ),
    ]


def _call(channel: grpc.Channel, row: tuple[Any, ...], token: str | None) -> str:
    app, _, stub_cls, method, message, streaming = row
    metadata = [("application", app)] + ([(MESH_TOKEN_METADATA, token)] if token else [])
    stub = stub_cls(channel)
    try:
        if streaming:
            for _ in getattr(stub, method)(message, metadata=metadata, timeout=10):
                pass
        else:
            getattr(stub, method)(message, metadata=metadata, timeout=10)
        return "OK"
    except grpc.RpcError as err:
        return str(err.code().name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--target", default="127.0.0.1:9000")
    args = ap.parse_args()
    token = os.environ.get(MESH_TOKEN_ENV)
    path = Path.home() / ".cache" / "slomesh" / "mesh-token"
    if not token and path.exists():
        token = path.read_text().strip()
    refused_all = True
    print("| RPC | without credential | with credential |")
    print("|---|---|---|")
    with grpc.insecure_channel(args.target) as channel:
        for row in _calls():
            without = _call(channel, row, None)
            with_ = _call(channel, row, token) if token else "(no token)"
            refused_all &= without == "UNAUTHENTICATED"
            print(f"| {row[1]} | {without} | {with_} |")
    out = subprocess.run(["ss", "-ltnp"], capture_output=True, text=True).stdout
    print("\nlistening sockets of Ray/Serve processes (ss -ltnp):")
    for line in out.splitlines():
        if any(k in line for k in ("ray", "python", "gcs_server", "raylet")):
            print("  " + " ".join(line.split()[3:5]) + "  " + line.split()[-1][:60])
    print("\nall internal RPCs refused without the credential:", refused_all)
    return 0 if refused_all else 1


if __name__ == "__main__":
    raise SystemExit(main())
