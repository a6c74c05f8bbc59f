"""Every named serving stack, one registry (`slomesh bench --policies` names come from here).

Each family's stacks live in their own file (baselines, qlm, scorpio, batching, slomesh); a
stack is a StackConfig (base.py). `STACKS.create(name)` returns it; an unknown name fails listing
the valid ones. `stack(name, policy_options)` adds policy overrides for one experiment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from shared.policy import Registry
from slomesh.bench.stacks.base import StackConfig
from slomesh.bench.stacks.baselines import BASELINE_STACKS
from slomesh.bench.stacks.batching import BATCHING_STACKS
from slomesh.bench.stacks.fairness import FAIRNESS_STACKS
from slomesh.bench.stacks.qlm import QLM_STACKS
from slomesh.bench.stacks.scorpio import SCORPIO_STACKS
from slomesh.bench.stacks.slomesh import SLOMESH_STACKS


def _constant(stack: StackConfig) -> Callable[[], StackConfig]:
    return lambda: stack


ALL_STACKS: list[StackConfig] = (
    BASELINE_STACKS
    + QLM_STACKS
    + SCORPIO_STACKS
    + BATCHING_STACKS
    + SLOMESH_STACKS
    + FAIRNESS_STACKS
)

STACKS: Registry[StackConfig] = Registry("policy", {s.name: _constant(s) for s in ALL_STACKS})
if len(STACKS.names()) != len(ALL_STACKS):
    raise RuntimeError("two serving stacks share a name")


def stack(name: str, policy_options: Mapping[str, Any] | None = None) -> StackConfig:
    """The stack `name`, with `policy_options` merged into its policy's options."""
    base = STACKS.create(name)
    return base.with_policy_options(policy_options) if policy_options else base
