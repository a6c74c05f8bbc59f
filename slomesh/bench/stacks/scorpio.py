"""SCORPIO: least-deadline-first engine queue plus the engine guards, and one ablation per guard.

`scorpio` switches on all three guards (TTFT guard, VBS admission, credit batching); each
`scorpio-no-<part>` switches one off, so `slomesh bench --policies` measures what each part buys.
"""

from __future__ import annotations

from shared.domain.scorpio import ScorpioConfig
from slomesh.bench.stacks.base import StackConfig

GUARDS: dict[str, str] = {
    "no-credit": "credit_batching",
    "no-vbs": "vbs_admission",
    "no-guard": "ttft_guard",
}
"""ablation suffix -> the ScorpioConfig switch it turns off."""

SCORPIO = StackConfig(
    name="scorpio",
    description="SCORPIO: LDF queue, TTFT guard (early rejection), VBS admission, credit batching",
    policy="least-loaded",
    queue_policy="edf",
    scorpio=ScorpioConfig(),
)

SCORPIO_STACKS: list[StackConfig] = [SCORPIO] + [
    SCORPIO.variant(
        f"scorpio-{suffix}", f"{SCORPIO.description} [{suffix}]", scorpio={field: False}
    )
    for suffix, field in GUARDS.items()
]
