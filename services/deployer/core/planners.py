"""Placement planners behind one small interface, registered by name.

HELR (UELLM Algorithm 2; services/deployer/README.md) is registered as "helr-he" and "helr-lr"
(services/deployer/core/helr_planner.py).

"first-fit": every replica of a model needs tensor_parallel GPUs on one node, tp being the
smallest of 1, 2, 4, 8 with which the model fits on that node's GPU type
(shared.profiles.smallest_fitting_tp). Models are placed largest first (weight bytes; models
outside the catalog count as 0 and keep their order), each replica on the first node, in the
given order, with enough free GPUs (the lowest free GPU ids are taken). CPU nodes take replicas of
`cpu_models` only, at tp 1, up to their engine slots. When a replica fits nowhere, the rest of its
demand is reported unplaced with each node's reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

from services.deployer.core.helr_planner import PRESETS, HELRPlanner
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
from shared.policy import Registry
from shared.profiles import TP_CHOICES, gpu_names, model_names, model_spec, smallest_fitting_tp


class Planner(Protocol):
    """Turns an inventory and per-model replica demands into placements."""

    name: str

    def plan(
        self,
        nodes: Sequence[Node],
        demands: Sequence[ModelDemand],
        engine: Engine,
        options: PlanOptions,
    ) -> Plan: ...


@dataclass
class _NodeState:
    node: Node
    free: list[int] = field(default_factory=list)
    used_slots: int = 0


def _model_bytes(model: str) -> int:
    return model_spec(model).weight_bytes if model in model_names() else 0


class FirstFitPlanner:
    """Greedy first-fit by node, largest models first (module docstring)."""

    name = "first-fit"

    def plan(
        self,
        nodes: Sequence[Node],
        demands: Sequence[ModelDemand],
        engine: Engine,
        options: PlanOptions,
    ) -> Plan:
        check_inventory(list(nodes), list(demands), engine)
        states = [_NodeState(n, free=list(range(n.gpus))) for n in nodes]
        tp_cache: dict[tuple[str, str], int | str] = {}
        ordered = sorted(
            enumerate(demands), key=lambda item: (-_model_bytes(item[1].model), item[0])
        )
        placements: list[Placement] = []
        unplaced: list[str] = []
        for _, demand in ordered:
            for r in range(demand.replicas):
                reasons: list[str] = []
                for st in states:
                    got = self._try(st, demand.model, options, tp_cache)
                    if isinstance(got, str):
                        reasons.append(f"{st.node.name}: {got}")
                        continue
                    tp, ids = got
                    placements.append(
                        Placement(
                            application=replica_name(len(placements)),
                            node=st.node.name,
                            gpu=st.node.gpu,
                            model=demand.model,
                            tensor_parallel=tp,
                            gpu_ids=ids,
                        )
                    )
                    break
                else:
                    why = "; ".join(reasons) if reasons else "no nodes in the inventory"
                    left = demand.replicas - r
                    unplaced.append(
                        f"{demand.model}: {left} of {demand.replicas} replicas unplaced ({why})"
                    )
                    break
        return Plan(
            placements=tuple(placements), unplaced=tuple(unplaced), engine=engine, planner=self.name
        )

    @staticmethod
    def _try(
        st: _NodeState,
        model: str,
        options: PlanOptions,
        tp_cache: dict[tuple[str, str], int | str],
    ) -> tuple[int, tuple[int, ...]] | str:
        """(tp, gpu ids) reserved on this node, or the rule that keeps the replica off it."""
        node = st.node
        if node.gpu == CPU_DEVICE:
            if model not in options.cpu_models:
                allowed = ", ".join(options.cpu_models) or "none configured"
                return f"cpu nodes host only cpu_models ({allowed})"
            if node.gpus > 0 and st.used_slots >= node.gpus:
                return f"all {node.gpus} cpu engine slots in use"
            st.used_slots += 1
            return 1, ()
        if node.gpu not in gpu_names():
            return f"unknown gpu type '{node.gpu}' (catalog: {', '.join(gpu_names())})"
        if model not in model_names():
            return f"model '{model}' is not in the profile catalog (GPU nodes need its shape)"
        key = (node.gpu, model)
        if key not in tp_cache:
            try:
                tp_cache[key] = smallest_fitting_tp(node.gpu, model, options.roofline)
            except ValueError:
                choices = list(TP_CHOICES)
                tp_cache[key] = (
                    f"{model} does not fit on {node.gpu} with any tensor_parallel in {choices}"
                )
        tp = tp_cache[key]
        if isinstance(tp, str):
            return tp
        if tp > node.gpus:
            return f"needs tensor_parallel={tp} {node.gpu} GPUs on one node, node has {node.gpus}"
        if len(st.free) < tp:
            return f"needs {tp} free {node.gpu} GPUs (tensor_parallel={tp}), {len(st.free)} free"
        ids = tuple(st.free[:tp])
        del st.free[:tp]
        return tp, ids


PLANNERS: Registry[Planner] = Registry(
    "placement planner",
    {
        FirstFitPlanner.name: FirstFitPlanner,
        **{name: partial(HELRPlanner, name) for name in PRESETS},
    },
)
"""Placement planners by name: first-fit and HELR's helr-he / helr-lr (UELLM Algorithm 2)."""


def plan(
    nodes: Sequence[Node],
    demands: Sequence[ModelDemand],
    engine: Engine,
    options: PlanOptions | None = None,
) -> Plan:
    """Place the demanded replicas on the nodes with the planner named in options."""
    opts = options if options is not None else PlanOptions()
    return PLANNERS.create(opts.planner).plan(nodes, demands, engine, opts)
