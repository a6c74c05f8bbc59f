"""`slomesh fidelity`: replay two traces (short chat prompts, a long-prompt mix) on real vLLM (CPU,
tiny model) and on the simulated engine; per-request TTFT/TPOT/E2E errors and vLLM's own noise
floor as markdown tables. By default the simulated engine is first calibrated on the serving
engine's own step timings (slomesh/sim/fidelity_run.py).

It reports and exits 0; it does not assert the target (accuracy is a benchmark figure).
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from shared.domain import HardwareProfile
from shared.profiles.io import load_profiles, profile_to_dict, save_profiles
from slomesh.cli.errors import UsageError
from slomesh.sim.fidelity import fidelity_table, meets_target
from slomesh.sim.trace import TRACE_SHAPES, save_trace

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
    p.add_argument("--requests", type=int, default=80, help="requests per trace (default 80)")
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
        default=2,
        help="replay each trace this many times on vLLM (default 2); >= 2 compares the sim with "
        "the per-request median and reports run 2 vs run 1 (the real engine's own noise floor)",
    )
    p.add_argument(
        "--traces",
        default="chat,long",
        help=f"trace shapes, comma-separated (default chat,long; valid: {', '.join(TRACE_SHAPES)})",
    )
    p.add_argument(
        "--no-calibrate",
        dest="calibrate",
        action="store_false",
        help="simulate with --profile as it is (default: first fit its step model and front-end "
        "overheads on vLLM serving calibration traces of other seeds)",
    )
    p.add_argument("--profile-out", type=Path, help="write the calibrated profile here")
    p.add_argument(
        "--out", type=Path, help="write DIR/fidelity.json (and DIR/profile.json when calibrated)"
    )
    p.add_argument("--trace-out", type=Path, help="write each trace as DIR/<shape>.jsonl")
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
    shapes = [x.strip() for x in args.traces.split(",") if x.strip()]
    bad = [x for x in shapes if x not in TRACE_SHAPES]
    if bad or not shapes:
        raise UsageError(f"--traces: unknown {bad or 'none'}; valid: {', '.join(TRACE_SHAPES)}")
    profile = pick_profile(args.profile, args.profile_model)
    from services.replica.vllm.config import VLLMEngineConfig
    from slomesh.sim import fidelity_run

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
    fit = None
    if args.calibrate:
        print(f"calibrating on vLLM serving {', '.join(shapes)} (seed {args.seed} + 1000) ...")
        profile, fit = fidelity_run.calibrate(
            profile,
            config,
            shapes,
            requests=args.requests,
            rate_rps=args.rate,
            seed=args.seed,
            torch_threads=threads,
        )
        print(
            f"serving fit: {fit.steps} steps, RMSE {fit.rmse_s * 1e3:.2f} ms, R² {fit.r2:.3f}; "
            f"submit {fit.submit_overhead_s * 1e3:.2f} ms, delivery "
            f"{fit.delivery_overhead_s * 1e3:.2f} ms per request"
        )
        profile_out = args.profile_out or (args.out / "profile.json" if args.out else None)
        if profile_out is not None:
            save_profiles(profile_out, [profile], {"serving_fit": fit.report()})
            print(f"profile: {profile_out}")
    traces = fidelity_run.shaped_traces(
        shapes, args.requests, args.rate, args.seed, args.max_model_len
    )
    if args.trace_out is not None:
        for name, _, trace in traces:
            save_trace(args.trace_out / f"{name}.jsonl", trace)
    results = fidelity_run.evaluate(
        profile, config, traces, seed=args.seed, repeats=args.repeats, torch_threads=threads
    )
    print(
        f"profile {profile.gpu}/{profile.model} ({profile.source}); load avg "
        f"{load_before:.1f} -> {os.getloadavg()[0]:.1f}"
    )
    for r in results:
        what = f"median of {args.repeats} vLLM runs" if args.repeats > 1 else "vLLM"
        print(
            f"\ntrace {r.name}: {len(traces[0][2])} requests at {args.rate} req/s "
            f"(inputs <= {r.spec.max_input_tokens} tokens); sim vs real ({what}), per request; "
            f"vLLM wall {', '.join(f'{w:.1f}' for w in r.wall_s)} s"
        )
        print(fidelity_table(r.errors))
        if r.noise is not None:
            print(f"noise floor ({r.name}): vLLM run 2 vs run 1, per request:")
            print(fidelity_table(r.noise, ("run 1", "run 2")))
        verdict = "meets" if meets_target(r.errors) else "misses"
        print(f"{r.name}: {verdict} the target (median abs error of TTFT and E2E <= 10%)")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        doc = fidelity_run.fidelity_json(results)
        doc["details"] = {
            "profile": profile_to_dict(profile),
            "serving_fit": fit.report() if fit is not None else None,
            "load_avg_1m": [load_before, os.getloadavg()[0]],
            "repeats": args.repeats,
            "traces": [
                {
                    "name": r.name,
                    "spec": asdict(r.spec),
                    "vllm_limits": asdict(r.limits),
                    "vllm_wall_s": r.wall_s,
                    "max_lateness_s": r.max_lateness_s,
                    "errors": [asdict(e) for e in r.errors],
                    "noise": [asdict(e) for e in r.noise] if r.noise is not None else None,
                }
                for r in results
            ],
        }
        (args.out / "fidelity.json").write_text(json.dumps(doc, indent=2) + "\n")
        print(f"report: {args.out / 'fidelity.json'}")
    return 0
