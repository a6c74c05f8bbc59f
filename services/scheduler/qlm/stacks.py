"""The `qlm` serving stacks: the full policy and its ablations (one LSO off, heuristic only)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from services.scheduler.global_policy import GlobalPolicy
from services.scheduler.qlm.config import QLMConfig
from services.scheduler.qlm.policy import QLMPolicy
from services.scheduler.stack import ServingStack

QLM_STACKS: dict[str, tuple[str, dict[str, Any], str]] = {
    "qlm": (
        "QLM: request groups, virtual queues, RWT estimator, ILP global scheduler, all LSOs",
        {},
        "edf",
    ),
    "qlm-heuristic": (
        "QLM with the heuristic global scheduler only (no ILP)",
        {"solver": {"solver": "heuristic"}},
        "edf",
    ),
    "qlm-true-lengths": (
        "QLM fed the true output lengths (no prediction error)",
        {"lengths": "true"},
        "edf",
    ),
    "qlm-no-pull": (
        "QLM ablation: requests pushed to their instance's FCFS engine queue at arrival",
        {"lso": {"pull": False}},
        "fcfs",
    ),
    "qlm-no-evict": ("QLM ablation: no request eviction", {"lso": {"evict": False}}, "edf"),
    "qlm-no-swap": (
        "QLM ablation: model swaps ignored by the planner, nothing pre-warmed",
        {"lso": {"swap": False}},
        "edf",
    ),
    "qlm-no-balance": (
        "QLM ablation: groups pinned round-robin to instances",
        {"lso": {"balance": False}},
        "edf",
    ),
}
"""name -> (description, QLMConfig overrides, engine queue policy)."""


def _policy(cfg: QLMConfig) -> GlobalPolicy:
    return QLMPolicy(cfg)


def _stack(name: str, overrides: dict[str, Any] | None = None) -> ServingStack:
    description, config, queue = QLM_STACKS[name]
    cfg = QLMConfig.model_validate(config | (overrides or {}))
    return ServingStack(
        name, description, functools.partial(_policy, cfg), queue, preemption_mode="auto"
    )


def qlm_stack(name: str, overrides: dict[str, Any] | None = None) -> ServingStack:
    """A `qlm` stack with extra QLMConfig overrides (e.g. {"grouping": {"delta": 8}})."""
    return _stack(name, overrides)


def qlm_stack_factories() -> dict[str, Callable[[], ServingStack]]:
    return {name: functools.partial(_stack, name) for name in QLM_STACKS}
