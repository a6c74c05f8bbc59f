"""SCORPIO stacks: least-deadline-first engine queue plus the engine guards, and their ablations.

`scorpio` switches on all three guards (TTFT guard, VBS admission, credit batching); each
`scorpio-no-<part>` switches one off, so `slomesh bench --policies` measures what each part buys.
"""

from __future__ import annotations

from collections.abc import Callable

from services.replica.scorpio.config import ScorpioConfig
from services.scheduler.global_policy import RoutingPolicy
from services.scheduler.routers import ROUTERS
from services.scheduler.stack import ServingStack

ABLATIONS: dict[str, str] = {
    "no-credit": "credit_batching",
    "no-vbs": "vbs_admission",
    "no-guard": "ttft_guard",
}


def scorpio_stack(name: str, config: ScorpioConfig) -> ServingStack:
    off = [k for k, field in ABLATIONS.items() if not getattr(config, field)]
    return ServingStack(
        name,
        "SCORPIO: LDF queue, TTFT guard (early rejection), VBS admission, credit batching"
        + (f" [{', '.join(off)}]" if off else ""),
        lambda: RoutingPolicy(ROUTERS.create("least-loaded")),
        "edf",
        scorpio=config,
    )


def scorpio_stack_factories() -> dict[str, Callable[[], ServingStack]]:
    def make(name: str, config: ScorpioConfig) -> Callable[[], ServingStack]:
        return lambda: scorpio_stack(name, config)

    out = {"scorpio": make("scorpio", ScorpioConfig())}
    for suffix, field in ABLATIONS.items():
        out[f"scorpio-{suffix}"] = make(f"scorpio-{suffix}", ScorpioConfig(**{field: False}))
    return out
