"""bench-agree's simulated scheduler plans with the profile the live scheduler was given, not
with the one calibrated for the simulated engines (slomesh/sim/scheduler.py `plan_with`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from shared.domain import HardwareProfile
from shared.domain.engine import EngineConfig
from shared.profiles.io import load_profiles
from slomesh.bench.agree.sim import SimRun, simulate
from slomesh.bench.agree.workload import (
    AgreeWorkloadSpec,
    generate_agree_workload,
    parse_classes,
)
from slomesh.stacks import STACKS

PROFILE = Path(__file__).resolve().parents[3] / "deploy/ray/profiles/cpu-tiny-llama.json"
CLASSES = "short:0.5:2:16:32-128,long:0.5:10:32:64-256"


def _run(engines: HardwareProfile, planning: HardwareProfile | None) -> SimRun:
    spec = AgreeWorkloadSpec(classes=parse_classes(CLASSES), requests=40, rate_rps=4)
    trace = generate_agree_workload(spec, 0)
    engine = EngineConfig(max_num_seqs=2, max_num_batched_tokens=2048)
    requests = [r.to_request(engines.model) for r in trace]
    # scorpio's admitter is the scheduler's TTFT guard, which predicts from the books' profile
    return simulate(engines, 2, engine, STACKS.create("scorpio"), requests, planning=planning)


def _guarded(run: SimRun) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in run.records:
        if "deadline-infeasible" in r.reject_reason:
            out[r.class_name] = out.get(r.class_name, 0) + 1
    return out


def test_the_ttft_guard_predicts_with_the_planning_profile() -> None:
    engines = load_profiles(PROFILE)[0]
    # a profile whose submit overhead alone (3 s) exceeds the short class's 2 s TTFT SLO
    slow = replace(engines, submit_overhead_s=3.0)
    assert _guarded(_run(engines, None)) == {}
    assert _guarded(_run(engines, engines)) == {}
    shorts = sum(r.class_name == "short" for r in _run(engines, None).records)
    # planned with the slow file, every short request is predicted late and turned away; the
    # long class's 10 s SLO still admits its requests
    assert _guarded(_run(engines, slow)) == {"short": shorts}
