"""The HELR placement planners "helr-he" and "helr-lr" (UELLM Algorithm 2; deployer README).

Inventory: options.inventory when set (a non-empty `nodes` list then selects which of its nodes
may be used; each GPU node named must be in the inventory with the same GPU count), else one
built from `nodes` with catalog memory/speed and default link latencies. CPU nodes are ignored.

Models are placed largest first (weight bytes; models outside the catalog are unplaced: HELR
needs their layers and bytes), replica after replica, each by one HELR run (services.deployer.
core.helr.solve) on the GPUs still free; a replica that cannot be placed leaves the rest of its
demand unplaced with the rule that failed. Presets: helr-he a1 = 0, a2 = 1 (fewest GPUs, then
lowest latency); helr-lr a1 = 10, a2 = 1 (latency in ms); options.helr.a1/a2 override them.
Each placement is a pipeline of tensor_parallel-1 stages (realize.py) with its model tiers
(tiers.py): the other demanded models that fit its GPUs by HELR's layer rule may be swapped in.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from services.deployer.core.helr import HELRProblem, Infeasible, Route, solve
from services.deployer.core.inventory import GPUConfig, Inventory, InventoryGPU, InventoryNode
from services.deployer.core.model import (
    CPU_DEVICE,
    Engine,
    ModelDemand,
    Node,
    Placement,
    Plan,
    PlanOptions,
    check_inventory,
    replica_name,
)
from services.deployer.core.tiers import TierPlan, TierReplica, plan_tiers
from shared.profiles import model_names, model_spec

PRESETS: dict[str, tuple[float, float]] = {"helr-he": (0.0, 1.0), "helr-lr": (10.0, 1.0)}
"""(a1, a2) of each registered HELR planner."""


def inventory_from_nodes(nodes: Sequence[Node]) -> Inventory:
    """GPU nodes as an inventory: catalog memory and HBM speed, default link latencies."""
    return Inventory(
        nodes=tuple(
            InventoryNode(name=n.name, gpus=(GPUConfig(type=n.gpu, count=n.gpus),))
            for n in nodes
            if n.gpu != CPU_DEVICE and n.gpus > 0
        )
    )


def _usable(nodes: Sequence[Node], options: PlanOptions) -> tuple[Inventory, set[str]]:
    """The inventory and the names of the nodes HELR may use (module docstring)."""
    gpu_nodes = [n for n in nodes if n.gpu != CPU_DEVICE]
    inv = options.inventory
    if inv is None:
        inv = inventory_from_nodes(gpu_nodes)
        return inv, {n.name for n in inv.nodes}
    if not gpu_nodes:
        return inv, {n.name for n in inv.nodes}
    counts: dict[str, int] = {}
    for g in inv.gpus():
        counts[g.node] = counts.get(g.node, 0) + 1
    for n in gpu_nodes:
        if n.name not in counts:
            raise ValueError(f"node '{n.name}' is not in plan_options.inventory")
        if counts[n.name] != n.gpus:
            raise ValueError(
                f"node '{n.name}' has {n.gpus} GPUs, plan_options.inventory lists {counts[n.name]}"
            )
    return inv, {n.name for n in gpu_nodes}


def _model_bytes(model: str) -> int:
    return model_spec(model).weight_bytes if model in model_names() else 0


class HELRPlanner:
    """HELR with the (a1, a2) preset of its name (module docstring)."""

    def __init__(self, name: str) -> None:
        if name not in PRESETS:
            raise ValueError(f"HELR preset must be one of {', '.join(PRESETS)}, got {name!r}")
        self.name = name

    def plan(
        self,
        nodes: Sequence[Node],
        demands: Sequence[ModelDemand],
        engine: Engine,
        options: PlanOptions,
    ) -> Plan:
        check_inventory(list(nodes), list(demands), engine)
        inv, allowed = _usable(nodes, options)
        gpus = inv.gpus()
        lat = inv.latency_matrix()
        memory = np.array([g.memory_bytes for g in gpus], dtype=np.int64)
        speed = np.array([g.speed_bytes_s for g in gpus], dtype=np.float64)
        free = np.array([g.node in allowed for g in gpus], dtype=bool)
        h = options.helr
        a1 = h.a1 if h.a1 is not None else PRESETS[self.name][0]
        a2 = h.a2 if h.a2 is not None else PRESETS[self.name][1]
        ordered = sorted(
            enumerate(demands), key=lambda item: (-_model_bytes(item[1].model), item[0])
        )
        placed: list[tuple[str, tuple[int, ...], Route]] = []
        unplaced: list[str] = []
        for _, d in ordered:
            if d.replicas and d.model not in model_names():
                unplaced.append(
                    f"{d.model}: {d.replicas} of {d.replicas} replicas unplaced (model rule: "
                    f"'{d.model}' is not in the profile catalog; HELR needs its layers and bytes)"
                )
                continue
            for r in range(d.replicas):
                spec = model_spec(d.model)
                idx = np.flatnonzero(free)
                prob = HELRProblem(
                    memory_bytes=memory[idx],
                    speed_bytes_s=speed[idx],
                    link_latency_s=lat[np.ix_(idx, idx)],
                    layers=spec.layers,
                    weight_bytes=spec.weight_bytes,
                    kv_reserve_bytes=h.kv_reserve_bytes,
                    p=h.p,
                    a1=a1,
                    a2=a2,
                )
                res = solve(prob, h.max_dp_gpus)
                if isinstance(res, Infeasible):
                    left = d.replicas - r
                    unplaced.append(f"{d.model}: {left} of {d.replicas} replicas unplaced ({res})")
                    break
                chosen = tuple(int(idx[i]) for i in res.order)
                free[list(chosen)] = False
                placed.append((d.model, chosen, res))
        stages = [[gpus[i] for i in chosen] for _, chosen, _ in placed]
        tier_input = [
            _tier_replica(model, st, route, demands, h.kv_reserve_bytes)
            for (model, _, route), st in zip(placed, stages, strict=True)
        ]
        weights = {m: model_spec(m).weight_bytes for m in model_names()}
        tiers = plan_tiers(tier_input, weights, inv.host_memory())
        placements = tuple(
            _placement(k, model, stages[k], route, tiers[k])
            for k, (model, _, route) in enumerate(placed)
        )
        return Plan(placements, tuple(unplaced), engine, self.name)


def _tier_replica(
    model: str, stages: list[InventoryGPU], route: Route, demands: Sequence[ModelDemand], t: int
) -> TierReplica:
    """The swap candidates of one replica: other catalogued demanded models that fit its GPUs
    (Σ floor((memory − T)/m') >= layers'), most-demanded first, then smaller, then by name."""
    share: dict[str, float] = {}
    total = sum(route.layers)
    for g, n in zip(stages, route.layers, strict=True):
        share[g.node] = share.get(g.node, 0.0) + n / total
    fits = []
    for d in demands:
        if d.model == model or d.model not in model_names():
            continue
        spec = model_spec(d.model)
        cap = sum(max(0, g.memory_bytes - t) * spec.layers // spec.weight_bytes for g in stages)
        if cap >= spec.layers:
            fits.append((-d.replicas, spec.weight_bytes, d.model))
    return TierReplica(model, share, tuple(m for *_, m in sorted(fits)))


def _placement(
    k: int, model: str, stages: list[InventoryGPU], route: Route, tiers: TierPlan
) -> Placement:
    first = stages[0]
    return Placement(
        application=replica_name(k),
        node=first.node,
        gpu=first.type,
        model=model,
        tensor_parallel=1,
        gpu_ids=tuple(g.index for g in stages),
        pipeline_parallel=len(stages),
        layer_partition=route.layers,
        stage_nodes=tuple(g.node for g in stages),
        latency_s=route.latency_s,
        model_tiers=tiers,
    )
