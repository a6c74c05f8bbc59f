"""The stage plugins: one factory per plugin, each `factory(name, params) -> Plugin`.

What each plugin does and its parameters: slomesh/stacks/README.md. Cluster plugins of the `qlm`
and `batching` families set the parts of QLMConfig / BatchingConfig they own; router placers
select the router; engine stages set the engines' fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.predictor.core.registry import PREDICTORS
from services.replica.core.queue_policies import QUEUE_POLICIES
from services.scheduler.core.batching.registry import BATCH_FORMERS
from services.scheduler.core.routers import ROUTERS
from slomesh.stacks.plugin import (
    Factory,
    Fragment,
    Plugin,
    Resolver,
    StageError,
    allow_params,
    every,
    fixed,
    no_params,
)

# ---- admitter -------------------------------------------------------------------------------
_IN_FLIGHT = "max_in_flight_per_replica"
"""Every admitter's parameter: the scheduler's in-flight cap per replica the stack runs with."""


def _in_flight(params: Mapping[str, Any]) -> dict[str, Any]:
    """The stack field an admitter's `max_in_flight_per_replica` sets (absent: the scheduler's
    own setting)."""
    if _IN_FLIGHT not in params:
        return {}
    value = params[_IN_FLIGHT]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise StageError(f"stages.admitter.params.{_IN_FLIGHT}: an integer >= 1, got {value!r}")
    return {_IN_FLIGHT: value}


def _no_admitter(name: str, params: Mapping[str, Any]) -> Plugin:
    allow_params("admitter", name, params, {_IN_FLIGHT: None})
    return Plugin("admitter", name, dict(params), every(Fragment(fields=_in_flight(params))))


def _ttft_guard(name: str, params: Mapping[str, Any]) -> Plugin:
    allowed = {"margin_s": None, "deadline_aware": None, "bounds_in_flight": None, _IN_FLIGHT: None}
    allow_params("admitter", name, params, allowed)
    frag = Fragment(
        fields=_in_flight(params),
        scorpio={
            "ttft_guard": True,
            "ttft_margin_s": params.get("margin_s", 0.0),
            "ttft_deadline_aware": bool(params.get("deadline_aware", False)),
            "ttft_bounds_in_flight": bool(params.get("bounds_in_flight", False)),
        },
    )
    return Plugin("admitter", name, dict(params), every(frag))


def _latency_slo(name: str, params: Mapping[str, Any]) -> Plugin:
    from services.scheduler.core.latency_slo_admitter import LatencySLOAdmitterConfig

    allowed = {**dict.fromkeys(LatencySLOAdmitterConfig.model_fields), _IN_FLIGHT: None}
    allow_params("admitter", name, params, allowed)
    own = {k: v for k, v in params.items() if k != _IN_FLIGHT}
    frag = Fragment(options={"slo_admitter": own}, fields=_in_flight(params))
    return Plugin("admitter", name, dict(params), {"router": lambda _f: frag})


# ---- orderer --------------------------------------------------------------------------------
QLM_ORDERER_KEYS: dict[str, Any] = {
    "grouping": None,
    "solver": None,
    "lso": {"pull": None, "swap": None},
    "slo_percentile": None,
    "pull_window_requests": None,
    "check_interval_s": None,
    "replan_min_interval_s": None,
    "rebalance_fraction": None,
    "reject_over_slo_factor": None,
    "fallback_output_tokens_s": None,
    "rwt_snapshot_s": None,
    "rwt_error": None,
    "tenancy": {"bands": None, "fairness": None, "vtc": None, "expire_late": None},
    "tight": None,
    "swap_plan": None,
}
"""QLMConfig keys the `qlm` orderer owns; eviction, shedding, placement and lengths are their
own stages' parameters."""


def _qlm_orderer(name: str, params: Mapping[str, Any]) -> Plugin:
    allow_params("orderer", name, params, QLM_ORDERER_KEYS)
    frag = Fragment(policy="qlm", options=dict(params))
    return Plugin("orderer", name, dict(params), {"qlm": lambda _f: frag})


def _flow_control(name: str, params: Mapping[str, Any]) -> Plugin:
    from services.scheduler.core.flow_control import FlowControlConfig

    allow_params("orderer", name, params, dict.fromkeys(FlowControlConfig.model_fields))
    frag = Fragment(options={"flow_control": dict(params)})
    return Plugin("orderer", name, dict(params), {"router": lambda _f: frag})


# ---- placer ---------------------------------------------------------------------------------
def _router_placer(name: str, params: Mapping[str, Any]) -> Plugin:
    """A router placer; round-robin and least-loaded also place batches, round-robin QLM groups."""
    try:
        ROUTERS.create(name, dict(params))  # validates the router's params
    except ValueError as err:
        raise StageError(f"stages.placer.params: {err}") from None
    options = {"router": dict(params)} if params else {}
    by: dict[str, Resolver] = {"router": lambda _f: Fragment(policy=name, options=options)}
    if name in ("round-robin", "least-loaded"):
        no_params("placer", name, params)
        by["batching"] = lambda _f: Fragment(options={"placer": name})
    if name == "round-robin":  # groups pinned round-robin, never rebalanced
        by["qlm"] = lambda _f: Fragment(options={"lso": {"balance": False}})
    return Plugin("placer", name, dict(params), by)


def _max_min(name: str, params: Mapping[str, Any]) -> Plugin:
    no_params("placer", name, params)
    return Plugin("placer", name, {}, {"batching": lambda _f: Fragment(options={"placer": name})})


def _rwt_backlog(name: str, params: Mapping[str, Any]) -> Plugin:
    no_params("placer", name, params)
    frag = Fragment(options={"lso": {"balance": True}})
    return Plugin("placer", name, {}, {"qlm": lambda _f: frag})


PREFIX_KEYS = dict.fromkeys(
    [
        "benefit_weight",
        "slack_fraction",
        "decode_tokens",
        "min_saved_s",
        "block_size_tokens",
        "fallback_prefill_tokens_s",
        "fallback_kv_capacity_tokens",
    ]
)


ADAPTER_KEYS: dict[str, Any] = {
    **dict.fromkeys(["slots", "load_s", "swap_penalty_s", "slack_fraction"]),
    "prefix": PREFIX_KEYS,
}
"""`rwt-adapter`'s parameters: AdapterAffinityConfig keys, and `prefix` (PrefixAffinityConfig
keys) for the prefix-cache-aware placement it keeps on."""


def _rwt_prefix(name: str, params: Mapping[str, Any]) -> Plugin:
    allow_params("placer", name, params, PREFIX_KEYS)
    frag = Fragment(options={"lso": {"balance": True}, "prefix": {"enabled": True, **params}})
    return Plugin("placer", name, dict(params), {"qlm": lambda _f: frag})


def _rwt_adapter(name: str, params: Mapping[str, Any]) -> Plugin:
    allow_params("placer", name, params, ADAPTER_KEYS)
    prefix = dict(params.get("prefix", {}))
    adapter = {k: v for k, v in params.items() if k != "prefix"}
    frag = Fragment(
        options={
            "lso": {"balance": True},
            "prefix": {"enabled": True, **prefix},
            "adapter": {"enabled": True, **adapter},
        }
    )
    return Plugin("placer", name, dict(params), {"qlm": lambda _f: frag})


# ---- evictor --------------------------------------------------------------------------------
def _no_evictor(name: str, params: Mapping[str, Any]) -> Plugin:
    no_params("evictor", name, params)
    by = every(Fragment())
    by["qlm"] = lambda _f: Fragment(options={"lso": {"evict": False}})
    return Plugin("evictor", name, {}, by)


def _qlm_evictor(name: str, params: Mapping[str, Any]) -> Plugin:
    allow_params("evictor", name, params, {"weigh_cost": None, "cost_factor": None})
    frag = Fragment(options={"lso": {"evict": True}, "eviction": dict(params)})
    return Plugin("evictor", name, dict(params), {"qlm": lambda _f: frag})


# ---- shedder --------------------------------------------------------------------------------
def _no_shedder(name: str, params: Mapping[str, Any]) -> Plugin:
    no_params("shedder", name, params)
    by = every(Fragment())
    by["qlm"] = lambda _f: Fragment(options={"tenancy": {"shed": False}})
    return Plugin("shedder", name, {}, by)


def _sheddable(name: str, params: Mapping[str, Any]) -> Plugin:
    allow_params("shedder", name, params, {"shed_backlog_factor": None})
    frag = Fragment(options={"tenancy": {"shed": True, **params}})
    return Plugin("shedder", name, dict(params), {"qlm": lambda _f: frag})


# ---- batch former ---------------------------------------------------------------------------
SCORPIO_KEYS = dict.fromkeys(
    [
        "credit_batching",
        "vbs_admission",
        "vbs_untargeted_free",
        "tpot_safety_factor",
        "tpot_slo_margin",
        "default_tpot_s",
        "credit_epsilon",
        "prefill_interference",
        "prior_output_tokens",
        "prior_input_tokens",
    ]
)
BATCHING_KEYS = dict.fromkeys(
    [
        "slice_iterations",
        "interval_lambda",
        "min_interval_s",
        "memory_fraction",
        "max_batch_size",
        "fifo_batch_size",
        "max_padding_waste",
        "odbs_lost_last",
        "odbs_slack_limit",
        "reform_on_slice_end",
    ]
)
ENGINE_FAMILIES = ("router", "qlm")


def _vllm_former(name: str, params: Mapping[str, Any]) -> Plugin:
    no_params("batch_former", name, params)
    frag = Fragment(scorpio={"credit_batching": False, "vbs_admission": False})
    return Plugin("batch_former", name, {}, {f: (lambda _f: frag) for f in ENGINE_FAMILIES})


def _scorpio_former(name: str, params: Mapping[str, Any]) -> Plugin:
    allow_params("batch_former", name, params, SCORPIO_KEYS)
    frag = Fragment(scorpio={"credit_batching": True, "vbs_admission": True, **params})
    return Plugin(
        "batch_former", name, dict(params), {f: (lambda _f: frag) for f in ENGINE_FAMILIES}
    )


def _cluster_former(name: str, params: Mapping[str, Any]) -> Plugin:
    allow_params("batch_former", name, params, BATCHING_KEYS)
    frag = Fragment(policy="batching", options={"former": name, **params})
    return Plugin("batch_former", name, dict(params), {"batching": lambda _f: frag})


CLUSTER_FORMERS = tuple(BATCH_FORMERS.names())
"""Batch formers that make a stack a `batching` stack (a central pool cut into batches)."""


# ---- engine stages and the length source ----------------------------------------------------
def _engine_field(stage: str, key: str) -> Factory:
    return fixed(stage, lambda name: every(Fragment(fields={key: name})))


def _predictor(name: str, params: Mapping[str, Any]) -> Plugin:
    no_params("length_source", name, params)
    return Plugin("length_source", name, {}, every(Fragment(fields={"length_predictor": name})))


def _oracle_lengths(name: str, params: Mapping[str, Any]) -> Plugin:
    no_params("length_source", name, params)
    by = every(Fragment())
    for fam in ("qlm", "batching"):
        by[fam] = lambda _f: Fragment(options={"lengths": "true"})
    return Plugin("length_source", name, {}, by)


def _hint_lengths(name: str, params: Mapping[str, Any]) -> Plugin:
    no_params("length_source", name, params)
    frag = Fragment(options={"lengths": "hints"})
    return Plugin("length_source", name, {}, {"batching": lambda _f: frag})


def _none(stage: str) -> Factory:
    return fixed(stage, lambda _name: every(Fragment()))


def factories() -> dict[str, dict[str, Factory]]:
    """stage -> plugin name -> factory(name, params)."""
    return {
        "admitter": {
            "none": _no_admitter,
            "ttft-guard": _ttft_guard,
            "latency-slo": _latency_slo,
        },
        "orderer": {
            "none": _none("orderer"),
            "qlm": _qlm_orderer,
            "llm-d-flow-control": _flow_control,
        },
        "placer": {
            **{n: _router_placer for n in ROUTERS.names()},
            "max-min": _max_min,
            "rwt-backlog": _rwt_backlog,
            "rwt-prefix": _rwt_prefix,
            "rwt-adapter": _rwt_adapter,
        },
        "evictor": {"none": _no_evictor, "qlm": _qlm_evictor},
        "shedder": {"none": _no_shedder, "sheddable": _sheddable},
        "batch_former": {
            "vllm": _vllm_former,
            "scorpio": _scorpio_former,
            **{n: _cluster_former for n in CLUSTER_FORMERS},
        },
        "engine_queue": {
            n: _engine_field("engine_queue", "queue_policy") for n in QUEUE_POLICIES.names()
        },
        "engine_mode": {
            n: _engine_field("engine_mode", "engine_mode") for n in ("continuous", "static")
        },
        "preemption": {
            n: _engine_field("preemption", "preemption_mode") for n in ("recompute", "swap", "auto")
        },
        "length_source": {
            **{n: _predictor for n in PREDICTORS.names()},
            "oracle": _oracle_lengths,
            "hints": _hint_lengths,
        },
    }
