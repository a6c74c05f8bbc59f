"""The scheduler's global policies, by name, each built from its config (one registry).

A global policy decides where each request goes (or that it is rejected): a plain router, QLM's
virtual queues, or a batch former (SCLS / UELLM). `create_global_policy(name, options, predictor)`
validates `options` against the policy's config model, so a bad key fails at start-up naming it.
The live scheduler reads the name and options from its Serve args; the simulator from a stack
(slomesh/stacks). Concrete policies are imported on first use, so asking for one does not
import the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.scheduler.core.global_policy import GlobalPolicy, RoutingPolicy
from shared.domain.length_prediction import LengthPredictor
from shared.policy import Registry


def _router(name: str) -> Any:
    def make(options: Mapping[str, Any], predictor: LengthPredictor | None) -> GlobalPolicy:
        from services.scheduler.core.routers import ROUTERS

        if options:
            raise ValueError(f"global policy '{name}' takes no options, got {sorted(options)}")
        return RoutingPolicy(ROUTERS.create(name))

    return make


def _qlm(options: Mapping[str, Any], predictor: LengthPredictor | None) -> GlobalPolicy:
    from services.scheduler.core.prefix_affinity import PrefixAffinity, PrefixAffinityConfig
    from services.scheduler.core.prefix_pinning import PrefixPinnedPolicy
    from services.scheduler.core.qlm.config import QLMConfig
    from services.scheduler.core.qlm.policy import QLMPolicy

    opts = dict(options)
    prefix = PrefixAffinityConfig.model_validate(opts.pop("prefix", {}))
    policy = QLMPolicy(QLMConfig.model_validate(opts), predictor=predictor)
    if not prefix.enabled:
        return policy
    return PrefixPinnedPolicy(policy, PrefixAffinity(prefix))


def _batching(options: Mapping[str, Any], predictor: LengthPredictor | None) -> GlobalPolicy:
    from services.scheduler.core.batching.config import BatchingConfig
    from services.scheduler.core.batching.policy import BatchingPolicy

    return BatchingPolicy(BatchingConfig.model_validate(dict(options)), predictor=predictor)


GLOBAL_POLICIES: Registry[GlobalPolicy] = Registry(
    "global policy",
    {
        "round-robin": _router("round-robin"),
        "least-loaded": _router("least-loaded"),
        "oracle-ttft": _router("oracle-ttft"),
        "prefix-only": _router("prefix-only"),
        "qlm": _qlm,
        "batching": _batching,
    },
)
"""name -> factory(options, predictor). Routers take no options; qlm takes a QLMConfig mapping
plus an optional `prefix` key (a PrefixAffinityConfig mapping: prefix-cache-aware placement,
core/prefix_affinity.py), batching a BatchingConfig mapping."""


def create_global_policy(
    name: str,
    options: Mapping[str, Any] | None = None,
    predictor: LengthPredictor | None = None,
) -> GlobalPolicy:
    """The global policy `name` built from `options` (UnknownNameError lists the valid names)."""
    return GLOBAL_POLICIES.create(name, options or {}, predictor)
