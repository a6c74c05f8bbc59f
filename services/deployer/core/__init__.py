"""Pure core of the deployer service: replica placement and the Ray Serve config for a plan.

`plan(nodes, demands, engine, options)` runs the planner named in options (registry PLANNERS,
"first-fit" for now); `serve_config(plan, serve_options)` and `to_yaml` turn the plan into what
`serve deploy` reads.
"""

from services.deployer.core.model import (
    CPU_DEVICE,
    ENGINES,
    Engine,
    ModelDemand,
    Node,
    Placement,
    Plan,
    PlanOptions,
)
from services.deployer.core.planners import PLANNERS, FirstFitPlanner, Planner, plan, replica_name
from services.deployer.core.serve_config import (
    REPLICA_ARG_KEYS,
    SERVICES,
    AppOptions,
    ServeOptions,
    ServiceName,
    serve_config,
    to_yaml,
)

__all__ = [
    "CPU_DEVICE",
    "ENGINES",
    "PLANNERS",
    "REPLICA_ARG_KEYS",
    "SERVICES",
    "AppOptions",
    "Engine",
    "FirstFitPlanner",
    "ModelDemand",
    "Node",
    "Placement",
    "Plan",
    "PlanOptions",
    "Planner",
    "ServeOptions",
    "ServiceName",
    "plan",
    "replica_name",
    "serve_config",
    "to_yaml",
]
