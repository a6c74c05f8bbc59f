"""The bench-agree set-up in the simulator: two CPU replicas of the tiny model with 2 seats
each, a 2 s class beside a 10 s one (the live agreement page's classes)."""

from __future__ import annotations

from pathlib import Path

from shared.domain import Request
from shared.domain.engine import EngineConfig
from shared.profiles.io import load_profiles
from slomesh.bench.agree.workload import AgreeWorkloadSpec, generate_agree_workload, parse_classes
from slomesh.sim.cluster import ClusterSpec, InstanceSpec

PROFILE = Path(__file__).resolve().parents[3] / "deploy/ray/profiles/cpu-tiny-llama.json"
CLASSES = "short:0.4:2:16:32-128,long:0.6:10:256:64-256"


def tiny_cpu_cluster(requests: int, rate_rps: float) -> tuple[ClusterSpec, list[Request]]:
    """The cluster and seed 0's workload of `requests` arrivals at `rate_rps`."""
    profile = load_profiles(PROFILE)[0]
    spec = AgreeWorkloadSpec(classes=parse_classes(CLASSES), requests=requests, rate_rps=rate_rps)
    reqs = [r.to_request(profile.model) for r in generate_agree_workload(spec, 0)]
    inst = InstanceSpec(gpu="cpu", models=[profile.model], count=2, profile_file=str(PROFILE))
    engine = EngineConfig(max_num_seqs=2, max_num_batched_tokens=2048)
    return ClusterSpec(instances=[inst], engine=engine), reqs
