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

from pydantic import BaseModel, ConfigDict, Field

from services.scheduler.core.global_policy import GlobalPolicy, RoutingPolicy
from shared.domain.length_prediction import LengthPredictor
from shared.policy import Registry


class RouterOptions(BaseModel):
    """Options of a router policy: the router's parameters, and llm-d's latency-SLO admitter
    and flow control in front of it (core/latency_slo_admitter.py, core/flow_control.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    router: dict[str, Any] = Field(default_factory=dict)
    """The router's parameters (its params_model; routers without one take none)."""
    flow_control: dict[str, Any] | None = None
    """A FlowControlConfig mapping: hold requests in priority bands while the pool is saturated."""
    slo_admitter: dict[str, Any] | None = None
    """A LatencySLOAdmitterConfig mapping: turn away sheddable work no replica can serve in time."""


def _router(name: str) -> Any:
    def make(options: Mapping[str, Any], predictor: LengthPredictor | None) -> GlobalPolicy:
        from services.scheduler.core.routers import ROUTERS

        opts = RouterOptions.model_validate(dict(options))
        router = ROUTERS.create(name, opts.router)
        if opts.flow_control is None and opts.slo_admitter is None:
            return RoutingPolicy(router)
        from services.scheduler.core.flow_control import FlowControlConfig, FlowControlPolicy
        from services.scheduler.core.latency_slo_admitter import (
            LatencySLOAdmitter,
            LatencySLOAdmitterConfig,
        )

        flow = None if opts.flow_control is None else FlowControlConfig(**opts.flow_control)
        admitter = None
        if opts.slo_admitter is not None:
            admitter = LatencySLOAdmitter(LatencySLOAdmitterConfig(**opts.slo_admitter))
        return FlowControlPolicy(router, flow, admitter)

    return make


def _qlm(options: Mapping[str, Any], predictor: LengthPredictor | None) -> GlobalPolicy:
    from services.scheduler.core.adapter_affinity import AdapterAffinity, AdapterAffinityConfig
    from services.scheduler.core.adapter_pinning import AdapterPinnedPolicy
    from services.scheduler.core.prefix_affinity import PrefixAffinity, PrefixAffinityConfig
    from services.scheduler.core.prefix_pinning import PrefixPinnedPolicy
    from services.scheduler.core.qlm.config import QLMConfig
    from services.scheduler.core.qlm.policy import QLMPolicy

    opts = dict(options)
    prefix = PrefixAffinityConfig.model_validate(opts.pop("prefix", {}))
    adapter = AdapterAffinityConfig.model_validate(opts.pop("adapter", {}))
    policy: GlobalPolicy = QLMPolicy(QLMConfig.model_validate(opts), predictor=predictor)
    if prefix.enabled:
        policy = PrefixPinnedPolicy(policy, PrefixAffinity(prefix))
    if adapter.enabled:
        policy = AdapterPinnedPolicy(policy, AdapterAffinity(adapter, prefix))
    return policy


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
        "pow2": _router("pow2"),
        "pow2-prefix": _router("pow2-prefix"),
        "llm-d-scorers": _router("llm-d-scorers"),
        "multiplex": _router("multiplex"),
        "static": _router("static"),
        "qlm": _qlm,
        "batching": _batching,
    },
)
"""name -> factory(options, predictor). Routers take RouterOptions; qlm takes a QLMConfig mapping
plus an optional `prefix` key (a PrefixAffinityConfig mapping: prefix-cache-aware placement,
core/prefix_affinity.py) and `adapter` key (an AdapterAffinityConfig mapping: LoRA-adapter-aware
placement, core/adapter_affinity.py), batching a BatchingConfig mapping."""


def create_global_policy(
    name: str,
    options: Mapping[str, Any] | None = None,
    predictor: LengthPredictor | None = None,
) -> GlobalPolicy:
    """The global policy `name` built from `options` (UnknownNameError lists the valid names)."""
    return GLOBAL_POLICIES.create(name, options or {}, predictor)
