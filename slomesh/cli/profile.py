"""`slomesh profile`: sweep an engine, fit its HardwareProfile and write a profile file.

--engine vllm starts real vLLM (the local tiny model unless --model is given) and times single
engine steps; --engine simulated sweeps the simulated engine running the roofline profile of
--sim-model on --gpu (the fit must give that profile back). The file (shared/profiles/io.py
format) holds the profile and, under "report", the fit RMSE/R² per coefficient set, the sweep
points, timings, ε and, with --workload, the output-length statistics per (model, SLO class).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path
from typing import Any

from slomesh.cli.errors import UsageError

TINY_SERVED_NAME = "tiny-llama"
TINY_DEFAULTS: dict[str, Any] = {
    "dtype": "float32",
    "max_model_len": 2048,
    "kv_cache_memory_bytes": 64 << 20,
}
"""The tiny model's engine settings of deploy/ray/local.yaml, so the profile matches the mesh's."""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("profile", help="sweep an engine and write its fitted hardware profile")
    p.add_argument("--engine", choices=("vllm", "simulated"), required=True)
    p.add_argument("--model", help="vllm: model dir or name (default: the local tiny model)")
    p.add_argument("--served-model-name", help="vllm: profile's model name (default: --model)")
    p.add_argument(
        "--gpu",
        help="simulated: the catalog GPU whose roofline profile the engine runs (required); "
        "vllm: device name to record instead of the detected one",
    )
    p.add_argument("--sim-model", help="simulated: the catalog model to run (required)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", dest="mode", action="store_const", const="quick")
    size.add_argument("--full", dest="mode", action="store_const", const="full")
    p.set_defaults(mode="quick")
    p.add_argument(
        "--out", type=Path, help="profile file (default runs/profiles/<gpu>-<model>.json)"
    )
    p.add_argument("--workload", type=Path, help="completion records (JSONL) to profile μ_o/σ_o")
    p.add_argument("--max-num-seqs", type=int, default=16, help="engine batch limit (16)")
    p.add_argument("--max-model-len", type=int, help="vllm: tokens per sequence")
    p.add_argument("--kv-cache-memory-bytes", type=int, help="vllm: KV cache size")
    p.add_argument("--dtype", choices=("auto", "bfloat16", "float16", "float32"))
    p.add_argument(
        "--swap-models",
        help="vllm: measure model swaps between these tiny base models instead of sweeping "
        "steps (comma-separated, e.g. tiny-llama,tiny-llama-b,tiny-llama-c; the replica's own "
        "swap: engine restart, OpenAI app, warm-up) and write one profile per model: --base's "
        "step times with the measured swap time",
    )
    p.add_argument(
        "--base",
        type=Path,
        help="--swap-models: the profile file whose step-time fit the models share "
        "(default deploy/ray/profiles/cpu-tiny-llama.json)",
    )
    p.add_argument("--repeats", type=int, default=2, help="--swap-models: cycles of swaps (2)")
    p.set_defaults(func=run_profile)


def _check(args: argparse.Namespace) -> None:
    if args.engine == "simulated":
        for flag, value in (
            ("--model", args.model),
            ("--served-model-name", args.served_model_name),
        ):
            if value is not None:
                raise UsageError(f"{flag}: only with --engine vllm (simulated runs --sim-model)")
        for flag, value in (("--gpu", args.gpu), ("--sim-model", args.sim_model)):
            if not value:
                raise UsageError(f"{flag}: required with --engine simulated")
        for flag in ("max_model_len", "kv_cache_memory_bytes", "dtype"):
            if getattr(args, flag) is not None:
                name = "--" + flag.replace("_", "-")
                raise UsageError(f"{name}: only with --engine vllm")
    elif args.sim_model is not None:
        raise UsageError("--sim-model: only with --engine simulated")
    for flag in ("max_num_seqs", "max_model_len", "kv_cache_memory_bytes"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise UsageError(f"--{flag.replace('_', '-')}: must be >= 1, got {value}")
    if args.workload is not None and not args.workload.is_file():
        raise UsageError(f"--workload: {args.workload} is not a file")


def _progress(msg: str) -> None:
    print(f"  {msg}", flush=True)


def _run_vllm(args: argparse.Namespace, settings: Any) -> Any:
    from services.profiler.core.sweep import required_batched_tokens
    from services.replica.vllm.config import VLLMEngineConfig
    from slomesh.profiling.vllm import profile_vllm

    settings_kw: dict[str, Any] = {}
    if args.model is None:
        from services.replica.vllm.tiny_model import build_tiny_model, default_tiny_model_dir

        model = str(build_tiny_model(default_tiny_model_dir()))
        settings_kw.update(TINY_DEFAULTS)
        served = args.served_model_name or TINY_SERVED_NAME
    else:
        model = str(Path(args.model).expanduser()) if args.model.startswith("~") else args.model
        served = args.served_model_name
    for key in ("max_model_len", "kv_cache_memory_bytes", "dtype"):
        if getattr(args, key) is not None:
            settings_kw[key] = getattr(args, key)
    max_len = settings_kw.get("max_model_len") or 1 << 30
    config = VLLMEngineConfig(
        model=model,
        served_model_name=served,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=required_batched_tokens(settings, args.max_num_seqs, max_len),
        enforce_eager=True,
        enable_prefix_caching=False,
        **settings_kw,
    )
    return profile_vllm(config, settings, _progress)


def _default_out(gpu: str, model: str) -> Path:
    return Path("runs") / "profiles" / f"{gpu}-{model.replace('/', '--')}.json"


def run_profile(args: argparse.Namespace) -> int:
    from services.profiler.core.sweep import PRESETS
    from services.profiler.core.workload import parse_records_jsonl, workload_profile
    from shared.profiles.io import save_profiles

    _check(args)
    if args.swap_models:
        return _run_swaps(args)
    settings = PRESETS[args.mode]
    t0 = time.perf_counter()
    if args.engine == "simulated":
        from slomesh.profiling.simulated import profile_simulated

        fitted = profile_simulated(
            args.gpu, args.sim_model, settings, max_num_seqs=args.max_num_seqs, progress=_progress
        )
    else:
        fitted = _run_vllm(args, settings)
    profile = fitted.profile
    if args.engine == "vllm" and args.gpu:
        profile = dataclasses.replace(profile, gpu=args.gpu)
    report = dict(fitted.report)
    report["mode"] = args.mode
    report["wall_s"] = time.perf_counter() - t0
    if args.workload is not None:
        records = parse_records_jsonl(args.workload.read_text().splitlines(), str(args.workload))
        report["workload"] = [dataclasses.asdict(g) for g in workload_profile(records)]
    out = args.out or _default_out(profile.gpu, profile.model)
    save_profiles(out, [profile], report)
    print("\n".join(summary_lines(profile, report, out)))
    return 0


def summary_lines(profile: Any, report: dict[str, Any], out: Path) -> list[str]:
    """The fit table, memory and links, ε and timings of a profile run."""
    lines = [
        f"profile {profile.gpu} / {profile.model} (tp {profile.tensor_parallel}): "
        + profile.source,
        f"{'':9}{'c1 s/(req·tok)':>16}{'c2 s/req':>12}{'c3 s/tok':>12}{'c4 s':>12}"
        f"{'RMSE ms':>10}{'R²':>8}{'max err':>9}{'points':>8}",
    ]
    for kind in ("prefill", "decode"):
        fit = report["fit"][kind]
        c = list(fit["coeffs_s"].values())
        lines.append(
            f"{kind:9}{c[0]:>16.3e}{c[1]:>12.3e}{c[2]:>12.3e}{c[3]:>12.3e}"
            f"{fit['rmse_s'] * 1e3:>10.3f}{fit['r2']:>8.3f}{fit['max_rel_error']:>9.1%}"
            f"{fit['points']:>8}"
        )
    lines.append(
        f"KV capacity {profile.kv_capacity_bytes} bytes = {profile.kv_capacity_tokens} tokens x "
        f"{profile.kv_bytes_per_token} B/token; weights {profile.weight_bytes} bytes"
    )
    lines.append(
        f"swap {profile.swap_bytes_s / 1e9:.3f} GB/s; cold load "
        f"{profile.cold_load_bytes_s / 1e6:.3f} MB/s"
    )
    eff = report.get("inefficiency")
    if eff:
        lines.append(
            f"ε = {profile.inefficiency:.3f} (ideal/measured {eff['ratio']:.3f}: measured "
            f"{eff['measured_tok_s']:.1f} tok/s, ideal {eff['ideal_tok_s']:.1f} tok/s, "
            f"{eff['requests']} requests)"
        )
    clock = report["engine_clock_s"]
    virtual = " (virtual)" if report.get("engine") == "simulated" else ""
    lines.append(
        f"engine clock{virtual}: sweep {clock['sweep']:.2f} s, ε run "
        f"{clock['inefficiency_run']:.2f} s"
    )
    parts = ", ".join(f"{k} {v:.1f} s" for k, v in report["timings_s"].items())
    lines.append(f"profile wall time {report['wall_s']:.1f} s ({parts})")
    for g in report.get("workload", []):
        lines.append(
            f"workload {g['model']}/{g['slo_class']}: n={g['count']} "
            f"μ_o={g['mean_output_tokens']:.1f} σ_o={g['std_output_tokens']:.1f} "
            f"p50={g['p50_output_tokens']:.0f} p90={g['p90_output_tokens']:.0f}"
        )
    lines.append(f"wrote {out}")
    return lines


def _run_swaps(args: argparse.Namespace) -> int:
    """`--swap-models`: time the replica's swaps between tiny base models (profiling/swap.py)."""
    from services.replica.vllm.config import VLLMEngineConfig
    from services.replica.vllm.engine import VLLMEngine
    from services.replica.vllm.tiny_models import build_named_tiny_model
    from shared.profiles.io import load_profiles, save_profiles
    from slomesh.launch import mesh
    from slomesh.profiling.swap import checkpoint_bytes, measure_swaps, swap_profiles

    if args.engine != "vllm":
        raise UsageError("--swap-models: only with --engine vllm")
    if args.repeats < 1:
        raise UsageError(f"--repeats: must be >= 1, got {args.repeats}")
    models = [m.strip() for m in args.swap_models.split(",") if m.strip()]
    if len(set(models)) < 2:
        raise UsageError("--swap-models: name at least 2 different models")
    try:
        dirs = {m: build_named_tiny_model(m) for m in models}
    except ValueError as err:
        raise UsageError(f"--swap-models: {err}") from None
    base = load_profiles(args.base or mesh.DEFAULT_PROFILES["vllm"])[0]
    settings = {**TINY_DEFAULTS}
    for key in ("max_model_len", "kv_cache_memory_bytes", "dtype"):
        if getattr(args, key) is not None:
            settings[key] = getattr(args, key)

    def build(model: str) -> Any:
        return VLLMEngine(
            VLLMEngineConfig(
                model=str(dirs[model]),
                served_model_name=model,
                max_num_seqs=args.max_num_seqs,
                enforce_eager=True,
                **settings,
            )
        )

    t0 = time.perf_counter()
    swaps = measure_swaps(models, build, args.repeats)
    profiles = swap_profiles(base, swaps, {m: checkpoint_bytes(d) for m, d in dirs.items()})
    out = args.out or Path("runs") / "profiles" / f"{base.gpu}-swap.json"
    report = {"swap_s": swaps, "repeats": args.repeats, "wall_s": time.perf_counter() - t0}
    save_profiles(out, profiles, report)
    for m, times in swaps.items():
        print(f"swap to {m}: " + ", ".join(f"{t:.2f} s" for t in times))
    print(f"wrote {out}")
    return 0
