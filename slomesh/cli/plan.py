"""`slomesh plan`: place models with a deployer planner (HELR: UELLM Algorithm 2; or first-fit),
print the device maps and write the Serve config; `--bench` times HELR's DP on
4-16 GPU inventories and compares HE, LR and first-fit; `--measure-links NODE` prints this
machine's measured GPU links as inventory `links` (CUDA only).

Estimated latency is the planners' per-token route latency: HELR's Σ link latency +
p·Σ layers·m/speed; for first-fit's tensor-parallel groups (bench only) p·W/(tp·speed) plus two
intra-node hops per layer when tp > 1 (the roofline's all-reduce count), same constants.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import yaml

from services.deployer.core import (
    PLANNERS,
    HELRParams,
    HELRProblem,
    Inventory,
    ModelDemand,
    Node,
    Plan,
    PlanOptions,
    Route,
    plan,
    serve_config,
    solve,
    to_yaml,
)
from services.deployer.core.finalize import finalize
from services.deployer.core.helr_planner import PRESETS, inventory_from_nodes
from services.deployer.core.realize import vllm_order_problem
from shared.profiles import gpu_spec, model_spec
from slomesh.cli.errors import UsageError

BENCH_SIZES = (4, 8, 12, 16)
BENCH_NODE_TYPES = ("A100-80GB", "A10-24GB", "H100-80GB", "A10-24GB")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("plan", help="place models with HELR or first-fit; --bench times HELR")
    p.add_argument("--inventory", type=Path, help="inventory YAML (deploy/ray/inventory/)")
    p.add_argument("--models", default="", help="model:replicas,... (replicas default 1)")
    p.add_argument("--planner", default="helr-lr", help="first-fit, helr-he or helr-lr")
    p.add_argument("--engine", default="vllm", choices=("vllm", "simulated"))
    p.add_argument("--kv-reserve-gb", type=float, help="HELR's T per GPU, GB (default 8)")
    p.add_argument("--p", type=float, help="HELR's compute multiplier p (default 1)")
    p.add_argument("--out", type=Path, help="write the Serve config (YAML) here")
    p.add_argument("--bench", action="store_true", help="time HELR on 4-16 GPUs, compare")
    p.add_argument("--seed", type=int, default=0, help="bench inventory seed (default 0)")
    p.add_argument("--measure-links", metavar="NODE", help="print measured links of this node")
    p.set_defaults(func=run)


def parse_models(text: str) -> list[ModelDemand]:
    out: list[ModelDemand] = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        name, _, count = item.partition(":")
        try:
            out.append(ModelDemand(name.strip(), int(count) if count else 1))
        except ValueError as e:
            raise UsageError(f"--models: bad entry '{item}' (want model:replicas): {e}") from e
    return out


def _helr_params(args: argparse.Namespace) -> HELRParams:
    kw: dict[str, float] = {}
    if args.kv_reserve_gb is not None:
        kw["kv_reserve_bytes"] = round(args.kv_reserve_gb * 1e9)
    if args.p is not None:
        kw["p"] = args.p
    return HELRParams.model_validate(kw)


def describe(p: Plan) -> list[str]:
    """One line per placement (its device map) and per unplaced demand."""
    lines = []
    for pl in p.placements:
        if pl.layer_partition:
            nodes = pl.stage_nodes
            ends = np.cumsum(pl.layer_partition)
            stages = " -> ".join(
                f"{n}/{g}[{e - k}:{e})"
                for n, g, k, e in zip(nodes, pl.gpu_ids, pl.layer_partition, ends, strict=True)
            )
            lat = f"{pl.latency_s * 1e3:.2f} ms" if pl.latency_s is not None else "?"
            lines.append(f"{pl.application} {pl.model}: pp={pl.pipeline_parallel} {stages} ~{lat}")
            if pl.model_tiers is not None:
                t = pl.model_tiers
                lines.append(f"    tiers: warm {list(t.warm)} cold {list(t.cold)}")
            problem = vllm_order_problem(nodes)
            if problem is not None:
                lines.append(f"    warning: {problem}")
        else:
            lines.append(
                f"{pl.application} {pl.model}: {pl.node} tp={pl.tensor_parallel} gpus {pl.gpu_ids}"
            )
    lines += [f"unplaced: {u}" for u in p.unplaced]
    return lines


def run(args: argparse.Namespace) -> int:
    if args.measure_links:
        from services.deployer.link_probe import measure_links

        links = [lk.model_dump() for lk in measure_links().as_links(args.measure_links)]
        print(yaml.safe_dump({"links": links}, sort_keys=False), end="")
        return 0
    if args.bench:
        bench(args.seed, _helr_params(args))
        return 0
    if args.inventory is None or not args.models:
        raise UsageError("give --inventory and --models (or --bench)")
    PLANNERS.check(args.planner)
    inventory = Inventory.model_validate(yaml.safe_load(args.inventory.read_text()))
    options = PlanOptions(planner=args.planner, inventory=inventory, helr=_helr_params(args))
    nodes = _first_fit_nodes(inventory) if args.planner == "first-fit" else []
    result = plan(nodes, parse_models(args.models), args.engine, options)
    for line in describe(result):
        print(line)
    if args.out is not None:
        from services.deployer.deployment import default_serve_options

        config = finalize(serve_config(result, default_serve_options()), {}, {})
        args.out.write_text(to_yaml(config))
        print(f"wrote {args.out}")
    return 0


def _first_fit_nodes(inventory: Inventory) -> list[Node]:
    """The inventory as first-fit's nodes: one GPU type per node, memory/speed from the catalog."""
    nodes = []
    for n in inventory.nodes:
        types = sorted({g.type for g in n.gpus})
        if len(types) > 1:
            raise UsageError(f"first-fit needs one GPU type per node; {n.name} has {types}")
        if types:
            nodes.append(Node(n.name, types[0], sum(g.count for g in n.gpus)))
    return nodes


def _random_problem(rng: np.random.Generator, n: int, a1: float, a2: float) -> HELRProblem:
    """n distinct GPUs (no interchangeable ones to drop) and a model that needs most of them:
    near the DP's worst case."""
    t = 4 * 10**9
    memory = rng.integers(16, 81, size=n) * 10**9 + rng.integers(0, 10**6, size=n)
    speed = rng.uniform(0.6e12, 3.35e12, size=n)
    lat = rng.uniform(5e-6, 2e-4, size=(n, n))
    lat = (lat + lat.T) / 2
    np.fill_diagonal(lat, 0.0)
    weight = int(0.9 * float((memory - t).sum()))
    return HELRProblem(memory, speed, lat, 96, weight, t, 1.0, a1, a2)


def _ff_latency_s(gpu: str, model: str, tp: int, p: float, intra_s: float) -> float:
    spec = model_spec(model)
    hops = 2 * spec.layers * intra_s if tp > 1 else 0.0
    return p * spec.weight_bytes / (tp * gpu_spec(gpu).hbm_bytes_s) + hops


def bench(seed: int, params: HELRParams) -> None:
    print("HELR DP plan time, distinct random GPUs, 96-layer model needing ~90% of their memory")
    print(f"{'GPUs':>4}  {'HE ms':>8} {'HE GPUs':>7}  {'LR ms':>8} {'LR GPUs':>7}")
    for n in BENCH_SIZES:
        row = [f"{n:>4}"]
        for name in ("helr-he", "helr-lr"):
            prob = _random_problem(np.random.default_rng(seed + n), n, *PRESETS[name])
            times, route = [], None
            for _ in range(3):
                t0 = time.perf_counter()
                route = solve(prob, max(params.max_dp_gpus, n))
                times.append(time.perf_counter() - t0)
            used = len(route.order) if isinstance(route, Route) else 0
            row.append(f"{statistics.median(times) * 1e3:>8.1f} {used:>7}")
        print("  ".join(row))
    print()
    print(
        "HE vs LR vs first-fit on catalog nodes of 4 GPUs (types cycle "
        + ", ".join(BENCH_NODE_TYPES)
        + ")"
    )
    print(f"{'GPUs':>4} {'planner':>9} {'placed':>7} {'GPUs used':>9} {'mean ms':>8} ", end="")
    print(f"{'max ms':>7} {'plan ms':>8}")
    for n in BENCH_SIZES:
        nodes = [Node(f"n{k}", BENCH_NODE_TYPES[k % 4], 4) for k in range(n // 4)]
        for name in ("helr-he", "helr-lr", "first-fit"):
            _compare_row(n, name, nodes, None, _bench_demands(n), params)
    print()
    print("HE vs LR on mixed nodes (2 x L40S-48GB 0.86 TB/s + 2 x A100-40GB 1.56 TB/s each)")
    print(f"{'GPUs':>4} {'planner':>9} {'placed':>7} {'GPUs used':>9} {'mean ms':>8} ", end="")
    print(f"{'max ms':>7} {'plan ms':>8}")
    for n in BENCH_SIZES:
        inventory = Inventory.model_validate(
            {"nodes": [_mixed_node(f"m{k}") for k in range(n // 4)]}
        )
        for name in ("helr-he", "helr-lr"):
            _compare_row(n, name, [], inventory, _bench_demands(n), params)


def _bench_demands(n: int) -> list[ModelDemand]:
    return [
        ModelDemand("llama-2-70b", n // 8 + 1),
        ModelDemand("llama-2-13b", n // 8 + 1),
        ModelDemand("llama-3.1-8b", n // 4),
    ]


def _mixed_node(name: str) -> dict[str, object]:
    return {
        "name": name,
        "gpus": [
            {"type": "L40S-48GB", "count": 2, "memory_bytes": 48 * 10**9, "speed_bytes_s": 864e9},
            {"type": "A100-40GB", "count": 2, "memory_bytes": 40 * 10**9, "speed_bytes_s": 1555e9},
        ],
    }


def _compare_row(
    n: int,
    name: str,
    nodes: list[Node],
    inventory: Inventory | None,
    demands: list[ModelDemand],
    params: HELRParams,
) -> None:
    intra = (inventory or inventory_from_nodes(nodes)).intra_node_latency_s
    options = PlanOptions(planner=name, inventory=inventory, helr=params)
    t0 = time.perf_counter()
    result = plan(nodes, demands, "vllm", options)
    ms = (time.perf_counter() - t0) * 1e3
    lats = [
        pl.latency_s
        if pl.latency_s is not None
        else _ff_latency_s(pl.gpu, pl.model, pl.tensor_parallel, params.p, intra)
        for pl in result.placements
    ]
    used = sum(pl.tensor_parallel * pl.pipeline_parallel for pl in result.placements)
    wanted = sum(d.replicas for d in demands)
    mean = statistics.mean(lats) * 1e3 if lats else 0.0
    worst = max(lats) * 1e3 if lats else 0.0
    print(
        f"{n:>4} {name:>9} {len(result.placements):>3}/{wanted:<3} {used:>9} "
        f"{mean:>8.2f} {worst:>7.2f} {ms:>8.1f}"
    )
