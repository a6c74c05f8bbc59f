"""What a stage plugin is: the fragment of the resolved stack it contributes, per family.

A plugin resolves to a `Fragment` for the scheduler family the stack uses (stages.py): `router`,
`qlm` or `batching`; a plugin that does not apply to the stack's family fails naming its stage.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

STAGES: tuple[str, ...] = (
    "admitter",
    "orderer",
    "placer",
    "evictor",
    "shedder",
    "batch_former",
    "engine_queue",
    "engine_mode",
    "preemption",
    "length_source",
)
"""Every stage a stack file names, in the order a request meets them."""

FAMILIES = ("router", "qlm", "batching")


class StageError(ValueError):
    """A stage's plugin or parameters do not fit (the message names `stages.<stage>`)."""


@dataclass(frozen=True)
class Fragment:
    """What one plugin contributes to the resolved stack (config.StackConfig)."""

    policy: str | None = None
    """The global policy this plugin selects (a router placer, orderer `qlm`, a batch former)."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """Merged into the global policy's options."""
    fields: Mapping[str, Any] = field(default_factory=dict)
    """StackConfig fields (queue_policy, engine_mode, preemption_mode, length_predictor,
    max_in_flight_per_replica)."""
    scorpio: Mapping[str, Any] = field(default_factory=dict)
    """Merged into the engines' ScorpioConfig (the guards are off unless a plugin sets them)."""


Resolver = Callable[[str], Fragment]
"""family -> the plugin's fragment in a stack of that family."""


@dataclass(frozen=True)
class Plugin:
    """One stage's plugin with its parameters, ready to resolve for a family."""

    stage: str
    name: str
    params: Mapping[str, Any]
    by_family: Mapping[str, Resolver]

    def fragment(self, family: str) -> Fragment:
        resolve = self.by_family.get(family)
        if resolve is None:
            raise StageError(
                f"stages.{self.stage}: plugin '{self.name}' does not apply to a {family} stack "
                f"(it applies to: {', '.join(self.by_family)})"
            )
        return resolve(family)


Factory = Callable[[str, Mapping[str, Any]], Plugin]


def allow_params(stage: str, name: str, params: Mapping[str, Any], allowed: dict[str, Any]) -> None:
    """Fail on a parameter outside `allowed` (a key -> None, or key -> nested allowed keys)."""
    for key, value in params.items():
        if key not in allowed:
            raise StageError(
                f"stages.{stage}.params.{key}: not a parameter of plugin '{name}' "
                f"(valid: {', '.join(sorted(allowed)) or 'none'})"
            )
        sub = allowed[key]
        if sub is not None:
            if not isinstance(value, Mapping):
                raise StageError(f"stages.{stage}.params.{key}: must be a mapping")
            allow_params(stage, f"{name}.{key}", value, sub)


def no_params(stage: str, name: str, params: Mapping[str, Any]) -> None:
    allow_params(stage, name, params, {})


def fixed(stage: str, by_family: Callable[[str], Mapping[str, Resolver]]) -> Factory:
    """A plugin without parameters."""

    def make(name: str, params: Mapping[str, Any]) -> Plugin:
        no_params(stage, name, params)
        return Plugin(stage, name, dict(params), by_family(name))

    return make


def every(fragment: Fragment) -> dict[str, Resolver]:
    def resolve(_family: str) -> Fragment:
        return fragment

    return dict.fromkeys(FAMILIES, resolve)
