"""`slomesh fidelity`: replay one trace on real vLLM (CPU, tiny model) and on the simulated
engine with a fitted profile; per-request TTFT/TPOT/E2E errors as a markdown table.

It reports and exits 0; it does not assert the target (accuracy is a benchmark figure).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from shared.domain import HardwareProfile
from shared.profiles.io import load_profiles, profile_to_dict
from slomesh.cli.errors import UsageError
from slomesh.sim.fidelity import compare, fidelity_table, median_timings, meets_target
from slomesh.sim.replay import RequestTiming, replay_sim, sim_engine_config
from slomesh.sim.trace import TraceSpec, make_trace, save_trace

DEFAULT_PROFILE = Path("deploy/ray/profiles/cpu-tiny-llama.json")
"""The measured profile of the tiny CPU model that `slomesh profile --engine vllm` ships."""
KV_CAP_BYTES = 1 << 30
"""vLLM's KV cache follows the profile's capacity, at most this much host memory."""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "fidelity", help="replay a trace on real vLLM and on the simulated engine; compare"
    )
    p.add_argument(
        "--profile", type=Path, default=DEFAULT_PROFILE, help=f"default {DEFAULT_PROFILE}"
    )
    p.add_argument("--profile-model", help="the profile's model (default: the file's only one)")
    p.add_argument("--requests", type=int, default=80, help="trace requests (default 80)")
    p.add_argument("--rate", type=float, default=2.0, help="Poisson arrivals per s (default 2)")
    p.add_argument("--seed", type=int, default=0, help="trace and prompt seed (default 0)")
    p.add_argument("--max-num-seqs", type=int, default=16, help="engine seats (default 16)")
    p.add_argument("--max-num-batched-tokens", type=int, default=2048, help="default 2048")
    p.add_argument("--max-model-len", type=int, default=2048, help="default 2048")
    p.add_argument("--model-dir", type=Path, help="vLLM model (default: the tiny model, built)")
    p.add_argument(
        "--dtype",
        choices=("auto", "bfloat16", "float16", "float32"),
        default="float32",
        help="vLLM dtype (default float32, the mesh's and the profiler's for the tiny model)",
    )
    p.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="OMP_NUM_THREADS of vLLM's engine core (default 1; 0: vLLM's default)",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="replay the trace this many times on vLLM; >= 2 compares the sim with the per-request "
        "median and reports run 2 vs run 1 (the real engine's own noise floor)",
    )
    p.add_argument("--out", type=Path, help="write the report (with per-request rows) as JSON")
    p.add_argument("--trace-out", type=Path, help="write the trace as JSONL")
    p.set_defaults(func=run)


def pick_profile(path: Path, model: str | None) -> HardwareProfile:
    if not path.is_file():
        raise UsageError(f"no profile file {path} (write one with `slomesh profile --engine vllm`)")
    profiles = load_profiles(path)
    if model is not None:
        found = [p for p in profiles if p.model == model]
        if not found:
            names = ", ".join(p.model for p in profiles)
            raise UsageError(f"{path} has no profile of model {model!r} (it has {names})")
        return found[0]
    if len(profiles) > 1:
        raise UsageError(f"{path} holds {len(profiles)} profiles: pick one with --profile-model")
    return profiles[0]


def _report(path: Path) -> dict[str, Any]:
    """The free-form "report" of a profile file ({} when it has none)."""
    try:
        report = json.loads(path.read_text()).get("report", {})
    except (OSError, ValueError, AttributeError):
        return {}
    return report if isinstance(report, dict) else {}


def setting_mismatches(path: Path, dtype: str, torch_threads: int | None) -> list[str]:
    """Engine settings of the replay that differ from those the profile's report records."""
    info = _report(path).get("engine_info", {})
    if not isinstance(info, dict):
        return []
    out = []
    measured = str(info.get("dtype", "")).removeprefix("torch.")
    if measured and dtype != "auto" and measured != dtype:
        out.append(f"the profile was measured with dtype {measured}, the replay runs {dtype}")
    threads = info.get("torch_threads")
    if isinstance(threads, list) and torch_threads is not None and threads != [torch_threads]:
        out.append(
            f"the profile was measured with torch threads {threads}, the replay runs "
            f"{torch_threads}"
        )
    return out


def profile_load(path: Path) -> str:
    """The 1-minute load average around the profile's measurement, as its report records it."""
    host = _report(path).get("host", {})
    before = host.get("load_avg_1m_before") if isinstance(host, dict) else None
    after = host.get("load_avg_1m_after") if isinstance(host, dict) else None
    if isinstance(before, int | float) and isinstance(after, int | float):
        return f"{before:.1f} -> {after:.1f}"
    return "not recorded"


def run(args: argparse.Namespace) -> int:
    if args.repeats < 1:
        raise UsageError("--repeats must be >= 1")
    profile = pick_profile(args.profile, args.profile_model)
    spec = TraceSpec(
        requests=args.requests,
        rate_rps=args.rate,
        seed=args.seed,
        max_model_len=args.max_model_len,
        max_input_tokens=min(1536, args.max_model_len - 2),
    )
    trace = make_trace(spec)
    if args.trace_out is not None:
        save_trace(args.trace_out, trace)
    from services.replica.vllm.config import VLLMEngineConfig
    from slomesh.sim.vllm_replay import replay_vllm

    model_dir = args.model_dir
    if model_dir is None:
        from services.replica.vllm.tiny_model import build_tiny_model, default_tiny_model_dir

        model_dir = build_tiny_model(default_tiny_model_dir())
    config = VLLMEngineConfig(
        model=str(model_dir),
        served_model_name=profile.model,
        max_model_len=args.max_model_len,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        dtype=args.dtype,
        kv_cache_memory_bytes=min(profile.kv_capacity_bytes, KV_CAP_BYTES),
    )
    threads = args.torch_threads if args.torch_threads > 0 else None
    for warning in setting_mismatches(args.profile, args.dtype, threads):
        print(f"warning: {warning}")
    load_before = os.getloadavg()[0]
    print(f"replaying {len(trace)} requests at {args.rate} req/s on vLLM ({model_dir}) ...")
    real = replay_vllm(trace, config, seed=args.seed, torch_threads=threads, repeats=args.repeats)
    lim = real.limits
    reference = median_timings(real.runs)
    sim_config = sim_engine_config(
        lim.max_num_seqs, lim.max_num_batched_tokens, lim.block_size_tokens
    )
    t0 = time.perf_counter()
    sim = replay_sim(trace, profile, sim_config)
    sim_wall = time.perf_counter() - t0
    errors = compare(reference, sim)
    print(
        f"profile {args.profile} ({profile.gpu}/{profile.model}, {profile.source}); "
        f"vLLM limits {asdict(lim)}; trace wall {', '.join(f'{w:.1f}' for w in real.wall_s)} s, "
        f"client lateness max {real.max_lateness_s * 1e3:.1f} ms; load avg {load_before:.1f} -> "
        f"{os.getloadavg()[0]:.1f} (profile measured at {profile_load(args.profile)})"
    )
    what = f"median of {args.repeats} vLLM runs" if args.repeats > 1 else "vLLM"
    print(f"\nsim vs real ({what}), per request:")
    print(fidelity_table(errors))
    floor = compare(real.runs[0], real.runs[1]) if args.repeats > 1 else None
    if floor is not None:
        print("\nnoise floor: vLLM run 2 vs run 1, per request:")
        print(fidelity_table(floor, ("run 1", "run 2")))
    verdict = "meets" if meets_target(errors) else "misses"
    print(f"{verdict} the target (median abs error of TTFT and E2E <= 10%)")
    if args.out is not None:
        report: dict[str, Any] = {
            "profile_path": str(args.profile),
            "profile": profile_to_dict(profile),
            "trace": asdict(spec),
            "vllm_limits": asdict(lim),
            "vllm_settings": {"dtype": args.dtype, "torch_threads": threads},
            "vllm_wall_s": real.wall_s,
            "repeats": args.repeats,
            "max_lateness_s": real.max_lateness_s,
            "sim_wall_s": sim_wall,
            "load_avg_1m": [load_before, os.getloadavg()[0]],
            "errors": [asdict(e) for e in errors],
            "noise_floor": [asdict(e) for e in floor] if floor is not None else None,
            "requests": _rows(reference, sim),
            "vllm_runs": [[asdict(t) for t in run] for run in real.runs],
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        print(f"report: {args.out}")
    return 0


def _rows(real: list[RequestTiming], sim: list[RequestTiming]) -> list[dict[str, Any]]:
    by_id = {s.request_id: s for s in sim}
    rows = []
    for r in real:
        s = by_id[r.request_id]
        rows.append(
            {
                "request_id": r.request_id,
                "arrival_s": r.arrival_s,
                "input_tokens": r.input_tokens,
                "output_tokens": r.output_tokens,
                "real": {"ttft_s": r.ttft_s, "tpot_s": r.tpot_s, "e2e_s": r.e2e_s},
                "sim": {"ttft_s": s.ttft_s, "tpot_s": s.tpot_s, "e2e_s": s.e2e_s},
            }
        )
    return rows
