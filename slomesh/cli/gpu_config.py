"""`slomesh gpu-config`: the GPU deployment's Serve config and KubeRay manifest from one file.

The file (deploy/gpu/cluster.yaml) states the models, replicas per model and GPUs per replica
once (services/deployer/core/gpu_cluster.py); this writes the Serve config for `serve deploy`
and the RayService manifest that embeds it (slomesh/kuberay.py). `--check` writes nothing and
fails when the files on disk differ from what would be written.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from slomesh.cli.errors import UsageError

DEFAULT_CLUSTER = Path("deploy/gpu/cluster.yaml")
DEFAULT_SERVE = Path("deploy/ray/gpu-multinode.yaml")
DEFAULT_RAYSERVICE = Path("deploy/kuberay/rayservice.yaml")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "gpu-config", help="write the GPU Serve config and KubeRay manifest from cluster.yaml"
    )
    p.add_argument("cluster", nargs="?", type=Path, default=DEFAULT_CLUSTER,
                   help=f"the GPU cluster file (default {DEFAULT_CLUSTER})")  # fmt: skip
    p.add_argument("--serve-out", type=Path, default=DEFAULT_SERVE,
                   help=f"Serve config to write (default {DEFAULT_SERVE})")  # fmt: skip
    p.add_argument("--rayservice-out", type=Path, default=DEFAULT_RAYSERVICE,
                   help=f"RayService manifest to write (default {DEFAULT_RAYSERVICE})")  # fmt: skip
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 if the files are not current")  # fmt: skip
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from slomesh.kuberay import render

    if not args.cluster.exists():
        raise UsageError(f"cluster: {args.cluster} does not exist")
    serve_yaml, manifest = render(args.cluster)
    outputs = ((args.serve_out, serve_yaml), (args.rayservice_out, manifest))
    if args.check:
        stale = [str(p) for p, text in outputs if not p.exists() or p.read_text() != text]
        for p in stale:
            print(f"{p} is not current: run `slomesh gpu-config {args.cluster}`")
        return 1 if stale else 0
    for path, text in outputs:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")
    return 0
