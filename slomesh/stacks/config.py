"""A serving stack resolved for running: what the simulator and the live mesh read.

A stack file (stack files: `files.py`; stages: `stages.py`) names one plugin per stage; `compose.py`
resolves those choices into this form: the scheduler's global policy and its options, the
engines' queue order, batching mode, preemption mode and SCORPIO guards, and the length predictor
of policies that plan on output lengths. The stage choices themselves stay in `stages`, so the
live mesh can refuse a stage it cannot run by its field name (`live.py`).
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


class StageChoice(BaseModel):
    """One stage of a stack file: the plugin that fills it and that plugin's parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    plugin: str
    """A name from the stage's registry (stages.py)."""
    params: dict[str, Any] = Field(default_factory=dict)
    """The plugin's parameters (each plugin validates its own; unknown keys fail)."""


class StackConfig(BaseModel):
    """One named serving stack, resolved (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    name: str
    """Stack name (`slomesh bench --stacks NAME`, `slomesh up --stack NAME`)."""
    description: str
    """One line: what the stack is and which paper or product it follows."""
    policy: str
    """The scheduler's global policy, a name from services/scheduler/core/policies.py."""
    policy_options: dict[str, Any] = Field(default_factory=dict)
    """Options of that policy (a router's parameters, a QLMConfig or a BatchingConfig mapping)."""
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
    max_in_flight_per_replica: int | None = Field(None, ge=1)
    """The scheduler's admission limit per replica (requests admitted and not finished) this
    stack runs with, simulated and live (admitter parameter `max_in_flight_per_replica`); None:
    the scheduler's own setting. A peer that queues without a limit of its own sets it above
    any trace."""
    stages: dict[str, StageChoice] = Field(default_factory=dict)
    """The stack file's stage choices this config was resolved from (stage -> plugin)."""

    def model_post_init(self, __context: Any) -> None:
        GLOBAL_POLICIES.check(self.policy)

    def global_policy(self, simulated: bool = False) -> GlobalPolicy:
        """A fresh global policy for one run (no state shared between runs). `simulated`: QLM's
        global scheduler is bounded by deterministic work limits instead of wall-clock time, so
        a simulated run is a pure function of its config and seed (the live scheduler keeps the
        wall-clock limit: it gets only `policy` and `policy_options`)."""
        predictor = None
        if self.policy in ("qlm", "batching") and self.policy_options.get("lengths") not in (
            "true",
            "hints",
        ):
            predictor = create_predictor(self.length_predictor)
        options = self.policy_options
        if simulated and self.policy == "qlm":
            options = deep_merge(options, {"solver": {"budget": "work"}})
        return create_global_policy(self.policy, options, predictor)

    def with_policy_options(self, overrides: Mapping[str, Any]) -> StackConfig:
        """The same stack with extra policy options merged in (e.g. {"grouping": {"delta": 8}})."""
        merged = deep_merge(self.policy_options, overrides)
        return self.model_copy(update={"policy_options": merged})
