"""`slomesh up`, `slomesh status`, `slomesh build-tiny-model`, `slomesh build-tiny-adapter`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from slomesh.cli import artefacts
from slomesh.cli.errors import UsageError
from slomesh.launch import listeners, mesh, readiness
from slomesh.launch.shards import with_shards
from slomesh.stacks import load_stack
from slomesh.stacks.live import apply_stack

FLAGSHIP_STACK = "slomesh"
"""The stack `slomesh up` (and `make up`) runs unless told otherwise."""

DEFAULT_METRICS_PORT = 8080
"""Where `slomesh up` exports Prometheus metrics (Ray's `_metrics_export_port`)."""
METRICS_HOSTS = ("127.0.0.1", "0.0.0.0")
"""Where Ray's exporter can listen: loopback (the embedded Ray node is a loopback one) or every
interface (Ray's default)."""


def _port(text: str) -> int:
    port = int(text)
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port (1-65535)")
    return port


def metrics_url(port: int) -> str:
    """The scrape URL of Ray's metrics export on this machine."""
    return f"http://127.0.0.1:{port}/metrics"


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    up = sub.add_parser("up", help="run the mesh on an embedded local Ray until Ctrl-C")
    up.add_argument(
        "--engine",
        choices=sorted(mesh.CONFIGS),
        default="vllm",
        help="vllm (the CPU build here, tiny local model) or simulated",
    )
    up.add_argument("--config", type=Path, help="a Serve config (default: by --engine)")
    up.add_argument("--num-cpus", type=int, help="CPUs Ray may schedule (default: all)")
    up.add_argument(
        "--shards",
        type=int,
        default=None,
        help="scheduler shards, active-active, dividing the replicas (default: the config's "
        "one scheduler); 1 also lets shards be added later (`slomesh shard add`)",
    )
    up.add_argument(
        "--stack",
        help="serving stack: a shipped stack name (slomesh/stacks/library) or a stack file "
        f"(default with the shipped configs: the flagship, {FLAGSHIP_STACK}; with --config: the "
        "config's own settings); a stage the live mesh cannot run is refused, naming it",
    )
    up.add_argument(
        "--profile",
        type=Path,
        action="append",
        default=[],
        metavar="PATH",
        help="a `slomesh profile` file for the scheduler, profiler and matching vLLM replicas "
        "(repeatable; default: the shipped measured profile of the tiny CPU model, "
        "deploy/ray/profiles/cpu-tiny-llama.json, when a vLLM replica of the config serves it)",
    )
    up.add_argument(
        "--metrics-port",
        type=_port,
        default=DEFAULT_METRICS_PORT,
        help="port of the Prometheus scrape endpoint (Ray's metrics export; "
        f"default {DEFAULT_METRICS_PORT}); see deploy/grafana/README.md",
    )
    up.add_argument(
        "--metrics-host",
        choices=METRICS_HOSTS,
        default=METRICS_HOSTS[0],
        help="where the metrics export listens: 127.0.0.1 (default) or 0.0.0.0, every interface "
        "(read-only metrics, no authentication: tenant names, load, SLO attainment)",
    )
    up.add_argument(
        "--allow-unauthenticated-public-listeners",
        action="store_true",
        help="start although a listener serving the API (front door, gRPC door, Serve's proxies) "
        "is bound beyond loopback while the ingress requires no API key: anyone who reaches it "
        "can generate, use the Batch API and spend the mesh's capacity",
    )
    up.add_argument(
        "--ready-timeout-s",
        type=float,
        default=readiness.READY_TIMEOUT_S,
        help="how long the start waits for every replica to be ready at the scheduler and one "
        "completion of each model a replica starts on through the OpenAI endpoint before it "
        f"gives up, naming what is short (default {readiness.READY_TIMEOUT_S:.0f})",
    )
    up.add_argument(
        "--exit-after-start",
        action="store_true",
        help="start, print the endpoints and the start-up time, then shut down",
    )
    up.set_defaults(func=run_up)
    st = sub.add_parser("status", help="the running mesh's replicas, asked over Serve handles")
    st.add_argument("--engine", choices=sorted(mesh.CONFIGS), default="vllm")
    st.add_argument("--config", type=Path)
    st.set_defaults(func=run_status)
    tiny = sub.add_parser("build-tiny-model", help="build the local random-weight test model")
    tiny.add_argument("--out", type=Path, help="folder (default ~/.cache/slomesh/models/<name>)")
    tiny.add_argument(
        "--name",
        default="tiny-llama",
        help="which tiny base model: tiny-llama (default), tiny-llama-b, tiny-llama-c "
        "(same shape and tokenizer, other weights), or all",
    )
    tiny.set_defaults(func=run_build_tiny)
    adapter = sub.add_parser(
        "build-tiny-adapter",
        help="build a random-weight LoRA adapter of a local base model (PEFT format)",
    )
    adapter.add_argument("--out", type=Path, required=True, help="the adapter's folder")
    adapter.add_argument(
        "--base", type=Path, help="base model folder (default ~/.cache/slomesh/models/tiny-llama)"
    )
    adapter.add_argument("--rank", type=int, default=8, help="LoRA rank r (default 8)")
    adapter.add_argument("--seed", type=int, default=0, help="weight seed (default 0)")
    adapter.set_defaults(func=run_build_adapter)


def run_build_tiny(args: argparse.Namespace) -> int:
    from services.replica.vllm.tiny_model import build_tiny_model
    from services.replica.vllm.tiny_models import TINY_BASE_MODELS, build_named_tiny_model

    names = list(TINY_BASE_MODELS) if args.name == "all" else [args.name]
    if names[0] not in TINY_BASE_MODELS:
        valid = ", ".join([*TINY_BASE_MODELS, "all"])
        raise UsageError(f"--name: unknown tiny model '{args.name}' (valid: {valid})")
    if args.out is not None and len(names) > 1:
        raise UsageError("--out: one folder holds one model (give --name, not all)")
    for name in names:
        if args.out is not None:
            path = build_tiny_model(args.out, **TINY_BASE_MODELS[name])
        else:
            path = build_named_tiny_model(name)
        print(f"{name} at {path}")
    return 0


def run_build_adapter(args: argparse.Namespace) -> int:
    from services.replica.vllm.tiny_adapter import build_tiny_adapter
    from services.replica.vllm.tiny_model import build_tiny_model, default_tiny_model_dir

    if args.rank < 1:
        raise UsageError(f"--rank: must be >= 1, got {args.rank}")
    base = args.base or build_tiny_model(default_tiny_model_dir())
    path = build_tiny_adapter(args.out, base, rank=args.rank, seed=args.seed)
    print(f"adapter at {path} (rank {args.rank}, seed {args.seed}, base {base})")
    return 0


def run_up(args: argparse.Namespace) -> int:
    config = mesh.load_config(args.config or mesh.CONFIGS[args.engine])
    profiles = list(args.profile) or mesh.shipped_profiles(config)
    if profiles:
        try:
            config = mesh.with_profiles(config, profiles)
        except ValueError as err:
            raise UsageError(f"--profile: {err}") from None
    stack_name = args.stack or (FLAGSHIP_STACK if args.config is None else None)
    if stack_name is not None:
        try:
            config = apply_stack(config, load_stack(stack_name))
        except ValueError as err:
            raise UsageError(f"--stack: {err}") from None
    if args.shards is not None:
        try:
            config = with_shards(config, args.shards)
        except ValueError as err:
            raise UsageError(str(err)) from None
    if args.allow_unauthenticated_public_listeners:
        config = listeners.allow_public_listeners(config)
    # refused before anything is built or started
    try:
        found = listeners.listeners(config, args.metrics_host, args.metrics_port)
        mesh.check_transport(config)
        listeners.check_exposure(config, found)
        listeners.check_ports_free(found, wait_s=mesh.START_PORT_WAIT_S)
    except (ValueError, listeners.PortTaken, listeners.PublicWithoutKeys) as err:
        raise UsageError(str(err)) from None
    from services.replica.vllm.tiny_models import build_named_tiny_model, tiny_models_in

    # the tiny models the config names (vLLM checkpoints, simulated replicas' tokenizers) that
    # are missing are built here, before any replica looks for them
    for name in tiny_models_in(config) or (["tiny-llama"] if args.config is None else []):
        build_named_tiny_model(name)
    try:
        for path in artefacts.build_missing(config):
            print(f"built the random-weight adapter {path}")
    except ValueError as err:
        raise UsageError(f"--config: {err}") from None
    try:
        try:
            took = mesh.start(
                config,
                args.num_cpus,
                metrics_port=args.metrics_port,
                metrics_host=args.metrics_host,
                ready_timeout_s=args.ready_timeout_s,
            )
        except readiness.MeshNotReady as err:
            print(f"slomesh up: error: {err}", file=sys.stderr)
            return 1
        http, grpc = mesh.endpoints(config)
        api = mesh.openai_url(config)
        via = f" (straight to the ingress replicas; through Serve's proxy: {http})"
        print(
            f"slomesh is up in {took:.1f} s: OpenAI API {api}{via if api != http else ''}, "
            f"gRPC {grpc}, Prometheus metrics {metrics_url(args.metrics_port)}"
        )
        print(listeners.table(found))
        print("applications: " + ", ".join(a["name"] for a in config["applications"]))
        print(f"stack: {stack_name or 'none (the config file as written)'}")
        if not args.exit_after_start:
            print("Ctrl-C to stop")
            mesh.wait_for_interrupt()
    finally:
        mesh.stop(config)
        print("slomesh stopped")
    return 0


def run_status(args: argparse.Namespace) -> int:
    from slomesh.cli.status import replica_status

    config = mesh.load_config(args.config or mesh.CONFIGS[args.engine])
    rows = replica_status(config)
    for row in rows:
        print("  ".join(f"{k}={v}" for k, v in row.items()))
    return 1 if any("error" in r for r in rows) else 0
