"""Serving stacks: the named policies `slomesh bench --policies` compares.

A stack fixes the global policy (router), the engine's queue order, its batching mode and its
preemption mode. Baselines are stacks like any other; `qlm` and its ablations live in
services/scheduler/qlm/stacks.py.
"""

from __future__ import annotations

from collections.abc import Callable

from services.scheduler.batching_stacks import batching_stack_factories
from services.scheduler.global_policy import GlobalPolicy, RoutingPolicy
from services.scheduler.qlm.stacks import qlm_stack_factories
from services.scheduler.routers import ROUTERS
from services.scheduler.scorpio_stacks import scorpio_stack_factories
from services.scheduler.slomesh_stacks import slomesh_stack_factories
from services.scheduler.stack import ServingStack
from shared.policy import Registry


def _routed(router: str) -> Callable[[], GlobalPolicy]:
    ROUTERS.check(router)
    return lambda: RoutingPolicy(ROUTERS.create(router))


def _stack(s: ServingStack) -> Callable[[], ServingStack]:
    return lambda: s


STACKS: Registry[ServingStack] = Registry(
    "policy",
    {
        "vllm-fcfs": _stack(
            ServingStack(
                "vllm-fcfs",
                "vLLM as deployed: round-robin routing, FCFS queue, preempt by recompute",
                _routed("round-robin"),
                "fcfs",
            )
        ),
        "edf": _stack(
            ServingStack(
                "edf",
                "earliest TTFT deadline first, least-loaded routing",
                _routed("least-loaded"),
                "edf",
            )
        ),
        "sls": _stack(
            ServingStack(
                "sls",
                "static batching (fixed batch size, padding), FCFS, round-robin",
                _routed("round-robin"),
                "fcfs",
                engine_mode="static",
            )
        ),
        "oracle": _stack(
            ServingStack(
                "oracle",
                "reference: true lengths, earliest-TTFT routing, EDF with eviction and swap",
                _routed("oracle-ttft"),
                "oracle-edf",
                preemption_mode="auto",
            )
        ),
    }
    | qlm_stack_factories()
    | scorpio_stack_factories()
    | batching_stack_factories()
    | slomesh_stack_factories(),
)
