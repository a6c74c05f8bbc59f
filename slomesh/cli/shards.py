"""`slomesh shard add|remove NAME`: a scheduler shard added to or removed from a running mesh
(the shards of a config: slomesh/launch/shards.py)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from slomesh.cli.errors import UsageError
from slomesh.launch import mesh
from slomesh.launch.shards import SCHEDULER, shard_app


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("shard", help="add or remove a scheduler shard of the running mesh")
    p.add_argument("action", choices=["add", "remove"])
    p.add_argument("name", help="the shard's application name, e.g. scheduler-2")
    p.add_argument("--engine", choices=sorted(mesh.CONFIGS), default="vllm")
    p.add_argument("--config", type=Path, help="the config the mesh runs (default: by --engine)")
    p.add_argument(
        "--node-ip",
        default="127.0.0.1",
        help="this machine's address in the mesh's Ray cluster (`slomesh up` runs a loopback "
        "node: 127.0.0.1); empty for Ray's own choice",
    )
    p.add_argument(
        "--peers",
        default=SCHEDULER,
        help="add: running shards the new one introduces itself to (comma-separated)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.node_ip == "127.0.0.1":  # attach to a loopback node (mesh.loopback_node)
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray
    from ray import serve

    config = mesh.load_config(args.config or mesh.CONFIGS[args.engine])
    base = next((a for a in config["applications"] if a["name"] == SCHEDULER), None)
    if base is None:
        raise UsageError(f"--config has no `{SCHEDULER}` application")
    mesh.load_mesh_token()
    node = {"_node_ip_address": args.node_ip} if args.node_ip else {}
    ray.init(address="auto", log_to_driver=False, **node)
    if args.action == "remove":
        serve.delete(args.name)
        print(f"shard {args.name} removed")
        return 0
    peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    app = shard_app(base, args.name, [*peers, args.name])
    serve.run(
        mesh._builder(app["import_path"])(app["args"]),
        name=app["name"],
        route_prefix=app["route_prefix"],
        blocking=False,
    )
    print(f"shard {args.name} added; peers {', '.join(peers)}")
    return 0
