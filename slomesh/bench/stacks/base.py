"""A serving stack: a whole-system preset, as data.

A stack names the scheduler's global policy and its options (services/scheduler/core/policies.py),
the engines' queue order, batching mode, preemption mode and SCORPIO guards, and the length
predictor that policies planning on output lengths use. Variants and ablations are the same stack
with overrides (`qlm` with `{"lso": {"pull": false}}`), never new classes. The simulator, the bench
and `slomesh up --policy` read stacks; the live scheduler receives only its part (policy name and
options), the replicas theirs (queue order, SCORPIO).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from services.predictor.core.registry import create_predictor
from services.scheduler.core.global_policy import GlobalPolicy
from services.scheduler.core.policies import GLOBAL_POLICIES, create_global_policy
from shared.domain.scorpio import ScorpioConfig


def deep_merge(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `overrides` applied; nested mappings merge key by key."""
    out = dict(base)
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


class StackConfig(BaseModel):
    """One named serving stack (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    """Registry name (`slomesh bench --policies NAME`)."""
    description: str
    """One line: what the stack is and which paper it follows."""
    policy: str
    """The scheduler's global policy, a name from services/scheduler/core/policies.py."""
    policy_options: dict[str, Any] = Field(default_factory=dict)
    """Options of that policy (a QLMConfig or BatchingConfig mapping; empty for routers)."""
    queue_policy: str = "fcfs"
    """Engine waiting-queue order (services/replica/core/queue_policies)."""
    engine_mode: Literal["continuous", "static"] = "continuous"
    """continuous: iteration-level batching (vLLM); static: pre-formed batches."""
    preemption_mode: Literal["recompute", "swap", "auto"] = "recompute"
    """How engines give back a preempted request's KV."""
    scorpio: ScorpioConfig | None = None
    """SCORPIO's engine guards (TTFT guard, VBS admission, credit batching); None: off."""
    length_predictor: str = "online-histogram"
    """The predictor (services/predictor registry) behind policies that plan on output lengths."""

    def model_post_init(self, __context: Any) -> None:
        GLOBAL_POLICIES.check(self.policy)

    def global_policy(self, simulated: bool = False) -> GlobalPolicy:
        """A fresh global policy for one run (no state shared between runs). `simulated`: QLM's
        global scheduler is bounded by deterministic work limits instead of wall-clock time, so
        a simulated run is a pure function of its config and seed (the live scheduler keeps the
        wall-clock limit: it gets only `policy` and `policy_options`)."""
        predictor = None
        if self.policy in ("qlm", "batching") and self.policy_options.get("lengths") != "true":
            predictor = create_predictor(self.length_predictor)
        options = self.policy_options
        if simulated and self.policy == "qlm":
            options = deep_merge(options, {"solver": {"budget": "work"}})
        return create_global_policy(self.policy, options, predictor)

    def variant(self, name: str, description: str, **overrides: Any) -> StackConfig:
        """This stack renamed, with fields replaced; `policy_options` and `scorpio` merge."""
        data = self.model_dump()
        for key, value in overrides.items():
            if key in ("policy_options", "scorpio") and isinstance(value, Mapping):
                value = deep_merge(data.get(key) or {}, value)
            data[key] = value
        return StackConfig.model_validate(data | {"name": name, "description": description})

    def with_policy_options(self, overrides: Mapping[str, Any]) -> StackConfig:
        """The same stack with extra policy options (e.g. {"grouping": {"delta": 8}})."""
        return self.variant(self.name, self.description, policy_options=dict(overrides))
