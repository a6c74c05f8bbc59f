"""Pure core of the deployer service: replica placement and the Ray Serve config for a plan.

`plan(nodes, demands, engine, options)` runs the planner named in options (registry PLANNERS:
"first-fit", and HELR's "helr-he" / "helr-lr", UELLM Algorithm 2); `serve_config(plan,
serve_options)` and `to_yaml` turn the plan into what `serve deploy` reads.
"""

from services.deployer.core.helr import HELRProblem, Infeasible, Route, solve
from services.deployer.core.helr_planner import HELRPlanner
from services.deployer.core.inventory import GPUConfig, HELRParams, Inventory, InventoryNode
from services.deployer.core.model import (
    CPU_DEVICE,
    ENGINES,
    Engine,
    ModelDemand,
    Node,
    Placement,
    Plan,
    PlanOptions,
    replica_name,
)
from services.deployer.core.planners import PLANNERS, FirstFitPlanner, Planner, plan
from services.deployer.core.serve_config import (
    REPLICA_ARG_KEYS,
    SERVICES,
    AppOptions,
    ServeOptions,
    ServiceName,
    serve_config,
    to_yaml,
)
from services.deployer.core.tiers import TierPlan, plan_tiers

__all__ = [
    "CPU_DEVICE",
    "ENGINES",
    "PLANNERS",
    "REPLICA_ARG_KEYS",
    "SERVICES",
    "AppOptions",
    "Engine",
    "FirstFitPlanner",
    "GPUConfig",
    "HELRParams",
    "HELRPlanner",
    "HELRProblem",
    "Infeasible",
    "Inventory",
    "InventoryNode",
    "ModelDemand",
    "Node",
    "Placement",
    "Plan",
    "PlanOptions",
    "Planner",
    "Route",
    "ServeOptions",
    "ServiceName",
    "TierPlan",
    "plan",
    "plan_tiers",
    "replica_name",
    "serve_config",
    "solve",
    "to_yaml",
]
