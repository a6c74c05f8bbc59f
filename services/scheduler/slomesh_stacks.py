"""The combined `slomesh` stack and its ablations.

`slomesh` = QLM queue management (request groups, virtual queues, RWT-driven global scheduler,
pulling, eviction, swapping, balancing) in front of continuous-batching engines that run
SCORPIO's guards (LDF queue, TTFT guard, VBS admission, credit batching). On static-batching
engines the best batching is SCLS's (DP batching, max-min offloading, slices): `slomesh-static`.
Each `slomesh-no-<part>` switches one part off, so the parts' contributions are measurable.
`slomesh-true-lengths` feeds QLM the true output lengths instead of the length predictor's, so
the attainment lost to prediction error is measurable (SCORPIO's guards use no output lengths).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from services.replica.scorpio.config import ScorpioConfig
from services.scheduler.batching.config import BatchingConfig
from services.scheduler.batching.policy import BatchingPolicy
from services.scheduler.global_policy import GlobalPolicy, RoutingPolicy
from services.scheduler.qlm.config import QLMConfig
from services.scheduler.qlm.policy import QLMPolicy
from services.scheduler.routers import ROUTERS
from services.scheduler.stack import ServingStack


def _qlm(cfg: QLMConfig) -> GlobalPolicy:
    return QLMPolicy(cfg)


def _least_loaded() -> GlobalPolicy:
    return RoutingPolicy(ROUTERS.create("least-loaded"))


# name -> (description, QLM on?, SCORPIO switches off)
SLOMESH_STACKS: dict[str, tuple[str, bool, dict[str, bool]]] = {
    "slomesh": ("QLM queue management + SCORPIO guards on continuous engines", True, {}),
    "slomesh-true-lengths": ("slomesh with QLM fed the true output lengths (oracle)", True, {}),
    "slomesh-no-qlm": ("slomesh without QLM (least-loaded routing)", False, {}),
    "slomesh-no-scorpio": ("slomesh without SCORPIO's guards (= qlm)", True, {"all": False}),
    "slomesh-no-credit": ("slomesh without credit batching", True, {"credit_batching": False}),
    "slomesh-no-vbs": ("slomesh without VBS admission", True, {"vbs_admission": False}),
    "slomesh-no-guard": ("slomesh without the TTFT guard", True, {"ttft_guard": False}),
}


def slomesh_stack(name: str, qlm: QLMConfig | None = None) -> ServingStack:
    description, use_qlm, off = SLOMESH_STACKS[name]
    scorpio = None if off.get("all") is False else ScorpioConfig(**off)
    if qlm is None:
        qlm = QLMConfig(lengths="true") if name == "slomesh-true-lengths" else QLMConfig()
    policy = functools.partial(_qlm, qlm) if use_qlm else _least_loaded
    return ServingStack(name, description, policy, "edf", preemption_mode="auto", scorpio=scorpio)


def _static() -> ServingStack:
    return ServingStack(
        "slomesh-static",
        "slomesh on static-batching engines: SCLS DP batching, max-min offloading, slices",
        functools.partial(BatchingPolicy, BatchingConfig()),
        "fcfs",
        engine_mode="static",
    )


def slomesh_stack_factories() -> dict[str, Callable[[], ServingStack]]:
    out: dict[str, Callable[[], ServingStack]] = {
        name: functools.partial(slomesh_stack, name) for name in SLOMESH_STACKS
    }
    out["slomesh-static"] = _static
    return out
