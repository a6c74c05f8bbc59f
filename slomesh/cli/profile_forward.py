"""`slomesh profile-forward`: time a random-weight Llama forward pass, fit a profile, compare it
with the roofline (services/profiler/torch_forward/).

Writes the fitted profile (profile file format of shared/profiles/io.py, with the comparison in its
"report") and a markdown comparison report, and prints the report.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from shared.profiles.io import save_profiles
from slomesh.cli.errors import UsageError

SHAPE_CHOICES = ("llama-3.1-8b", "tiny")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "profile-forward",
        help="profile a random-weight Llama forward pass (torch) and compare with the roofline",
    )
    p.add_argument(
        "--shape",
        choices=SHAPE_CHOICES,
        default="llama-3.1-8b",
        help="model shape (default llama-3.1-8b; tiny: the CPU replicas' tiny Llama)",
    )
    p.add_argument(
        "--device", choices=("cuda", "cpu"), help="default: cuda when torch sees one, else cpu"
    )
    p.add_argument("--dtype", choices=("bf16", "fp32"), help="default: bf16 on cuda, fp32 on cpu")
    p.add_argument(
        "--gpu",
        default="H200-141GB",
        help="catalog GPU of the roofline to compare with and of a CUDA profile; a unique "
        "prefix such as H200 is enough (default H200-141GB)",
    )
    p.add_argument("--quick", action="store_true", help="fewer grid points and repeats")
    p.add_argument(
        "--allow-cpu",
        action="store_true",
        help="allow --shape llama-3.1-8b on cpu (very slow: tens of GB of fp32 weights)",
    )
    p.add_argument(
        "--kv-capacity-gib",
        type=float,
        help="KV capacity to record (default: 0.9 x device memory - weights - 2 GiB on cuda, "
        "1 GiB on cpu)",
    )
    p.add_argument(
        "--threads",
        type=int,
        help="torch CPU threads during the run (default: torch's; 1 on a shared, loaded CPU)",
    )
    p.add_argument(
        "--decode",
        choices=("cuda-graph", "eager"),
        help="how decode steps run: cuda-graph (static KV cache, one CUDA graph replay per "
        "step, as vLLM runs decode; the default on cuda) or eager (DynamicCache, op by op; the "
        "default on cpu, where there are no CUDA graphs)",
    )
    p.add_argument("--seed", type=int, default=0, help="weights and token ids seed (default 0)")
    p.add_argument(
        "--out-profile",
        type=Path,
        help="profile file (default runs/profile-forward/<model>-<device>-<dtype>.json)",
    )
    p.add_argument(
        "--out-report",
        type=Path,
        help="markdown report (default: the profile file's path with .md)",
    )
    p.set_defaults(func=run)


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from services.profiler import torch_forward as tf

    shape = tf.shape_named(args.shape)
    gpu = tf.resolve_gpu(args.gpu)
    kv_capacity: int | None = None
    if args.kv_capacity_gib is not None:
        if not args.kv_capacity_gib > 0:
            raise UsageError(f"--kv-capacity-gib must be > 0, got {args.kv_capacity_gib}")
        kv_capacity = int(args.kv_capacity_gib * 2**30)
    if args.threads is not None and args.threads < 1:
        raise UsageError(f"--threads must be >= 1, got {args.threads}")

    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda, but torch sees no CUDA device")
    if device == "cpu" and shape.catalog_model is not None and not args.allow_cpu:
        raise UsageError(
            f"--shape {shape.name} on cpu would build {shape.param_count() / 1e9:.1f} B "
            "parameters and take very long; use --shape tiny on cpu, run on a CUDA machine, "
            "or pass --allow-cpu"
        )
    dtype = args.dtype or ("bf16" if device == "cuda" else "fp32")
    if device == "cuda":
        name = torch.cuda.get_device_name()
        family = gpu.split("-")[0]
        if family.lower() not in name.lower():
            print(
                f"warning: the CUDA device is {name!r} but the profile will be labelled {gpu}; "
                "pass --gpu with the matching catalog name",
                file=sys.stderr,
            )

    grid = tf.default_grid(shape.name, args.quick)
    swap_probe = 64 * 2**20 if args.quick or device == "cpu" else 256 * 2**20
    m = tf.measure(
        shape,
        device=device,
        dtype=dtype,
        grid=grid,
        seed=args.seed,
        swap_probe_bytes=swap_probe,
        threads=args.threads,
        decode_mode=args.decode or ("cuda-graph" if device == "cuda" else "eager"),
        progress=_progress,
    )
    c = tf.compare(m, gpu, kv_capacity_bytes=kv_capacity)

    out_profile: Path = args.out_profile or Path(
        f"runs/profile-forward/{shape.model}-{device}-{dtype}.json"
    )
    out_report: Path = args.out_report or out_profile.with_suffix(".md")
    save_profiles(out_profile, [c.fitted.profile], tf.report_dict(c))
    text = tf.render_report(c, profile_path=str(out_profile))
    out_report.parent.mkdir(parents=True, exist_ok=True)
    out_report.write_text(text)
    print(text)
    print(f"wrote {out_profile} and {out_report}", file=sys.stderr)
    return 0
