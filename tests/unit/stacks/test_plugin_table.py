"""Every stage plugin, table-driven: what it contributes to a stack of each family, and what it
refuses (a family it does not apply to, a parameter it does not take) naming the field.

One row per (stage, plugin, params, family): the expected `Fragment`, or the text the
StageError must contain. test_plugin_docs.py checks that every registered plugin has rows here.
"""

from __future__ import annotations

from typing import Any

import pytest

from slomesh.stacks.stages import Fragment, StageError, create_plugin

F = Fragment
Row = tuple[str, str, dict[str, Any], str, Fragment | str]
NOT_HERE = "does not apply to a"
NO_BOUND = {"ttft_bounds_in_flight": False}
GUARD_ON = F(
    scorpio={"ttft_guard": True, "ttft_margin_s": 0.0, "ttft_deadline_aware": False, **NO_BOUND}
)
SCORPIO_ON = F(scorpio={"credit_batching": True, "vbs_admission": True})
VLLM_ENGINE = F(scorpio={"credit_batching": False, "vbs_admission": False})

ROWS: list[Row] = [
    # admitter
    ("admitter", "none", {}, "qlm", F()),
    ("admitter", "none", {"x": 1}, "router", "stages.admitter.params.x"),
    (
        "admitter",
        "none",
        {"max_in_flight_per_replica": 4096},
        "router",
        F(fields={"max_in_flight_per_replica": 4096}),
    ),
    (
        "admitter",
        "none",
        {"max_in_flight_per_replica": 0},
        "qlm",
        "stages.admitter.params.max_in_flight_per_replica",
    ),
    ("admitter", "ttft-guard", {}, "router", GUARD_ON),
    (
        "admitter",
        "ttft-guard",
        {"margin_s": 0.25},
        "qlm",
        F(
            scorpio={
                "ttft_guard": True,
                "ttft_margin_s": 0.25,
                "ttft_deadline_aware": False,
                **NO_BOUND,
            }
        ),
    ),
    (
        "admitter",
        "ttft-guard",
        {"deadline_aware": True},
        "router",
        F(
            scorpio={
                "ttft_guard": True,
                "ttft_margin_s": 0.0,
                "ttft_deadline_aware": True,
                **NO_BOUND,
            }
        ),
    ),
    (
        "admitter",
        "ttft-guard",
        {"bounds_in_flight": True},
        "qlm",
        F(
            scorpio={
                "ttft_guard": True,
                "ttft_margin_s": 0.0,
                "ttft_deadline_aware": False,
                "ttft_bounds_in_flight": True,
            }
        ),
    ),
    ("admitter", "ttft-guard", {"margin": 1}, "qlm", "stages.admitter.params.margin"),
    ("admitter", "latency-slo", {}, "router", F(options={"slo_admitter": {}})),
    (
        "admitter",
        "latency-slo",
        {"cold_kv_fraction": 0.05},
        "router",
        F(options={"slo_admitter": {"cold_kv_fraction": 0.05}}),
    ),
    (
        "admitter",
        "latency-slo",
        {"max_in_flight_per_replica": 4096},
        "router",
        F(options={"slo_admitter": {}}, fields={"max_in_flight_per_replica": 4096}),
    ),
    ("admitter", "latency-slo", {}, "qlm", NOT_HERE),
    # orderer
    ("orderer", "none", {}, "router", F()),
    ("orderer", "qlm", {}, "qlm", F(policy="qlm")),
    (
        "orderer",
        "qlm",
        {"tight": {"direct_max_ttft_s": 2.0}},
        "qlm",
        F(policy="qlm", options={"tight": {"direct_max_ttft_s": 2.0}}),
    ),
    ("orderer", "qlm", {"tenancy": {"shed": True}}, "qlm", "stages.orderer.params.shed"),
    ("orderer", "qlm", {}, "router", NOT_HERE),
    (
        "orderer",
        "llm-d-flow-control",
        {"ordering": "edf"},
        "router",
        F(options={"flow_control": {"ordering": "edf"}}),
    ),
    ("orderer", "llm-d-flow-control", {"depth": 3}, "router", "stages.orderer.params.depth"),
    ("orderer", "llm-d-flow-control", {}, "qlm", NOT_HERE),
    # placer
    ("placer", "round-robin", {}, "router", F(policy="round-robin")),
    ("placer", "round-robin", {}, "batching", F(options={"placer": "round-robin"})),
    ("placer", "round-robin", {}, "qlm", F(options={"lso": {"balance": False}})),
    ("placer", "least-loaded", {}, "router", F(policy="least-loaded")),
    ("placer", "least-loaded", {}, "batching", F(options={"placer": "least-loaded"})),
    ("placer", "least-loaded", {}, "qlm", NOT_HERE),
    ("placer", "oracle-ttft", {}, "router", F(policy="oracle-ttft")),
    ("placer", "prefix-only", {}, "router", F(policy="prefix-only")),
    ("placer", "pow2", {}, "router", F(policy="pow2")),
    ("placer", "pow2", {"seed": 3}, "router", F(policy="pow2", options={"router": {"seed": 3}})),
    ("placer", "pow2", {"sead": 3}, "router", "stages.placer.params"),
    ("placer", "pow2-prefix", {}, "router", F(policy="pow2-prefix")),
    ("placer", "pow2-prefix", {}, "qlm", NOT_HERE),
    ("placer", "llm-d-scorers", {}, "router", F(policy="llm-d-scorers")),
    (
        "placer",
        "llm-d-scorers",
        {"prefix_weight": 1.0},
        "router",
        F(policy="llm-d-scorers", options={"router": {"prefix_weight": 1.0}}),
    ),
    ("placer", "multiplex", {}, "router", F(policy="multiplex")),
    ("placer", "multiplex", {}, "qlm", NOT_HERE),
    ("placer", "static", {}, "router", F(policy="static")),
    (
        "placer",
        "rwt-adapter",
        {"load_s": 0.5},
        "qlm",
        F(
            options={
                "lso": {"balance": True},
                "prefix": {"enabled": True},
                "adapter": {"enabled": True, "load_s": 0.5},
            }
        ),
    ),
    ("placer", "rwt-adapter", {"slot": 2}, "qlm", "stages.placer.params.slot"),
    ("placer", "rwt-adapter", {}, "router", NOT_HERE),
    ("placer", "max-min", {}, "batching", F(options={"placer": "max-min"})),
    ("placer", "max-min", {}, "router", NOT_HERE),
    ("placer", "rwt-backlog", {}, "qlm", F(options={"lso": {"balance": True}})),
    ("placer", "rwt-backlog", {}, "router", NOT_HERE),
    (
        "placer",
        "rwt-prefix",
        {"min_saved_s": 0.1},
        "qlm",
        F(options={"lso": {"balance": True}, "prefix": {"enabled": True, "min_saved_s": 0.1}}),
    ),
    (
        "placer",
        "rwt-prefix",
        {"decode_tokens": 50},
        "qlm",
        F(options={"lso": {"balance": True}, "prefix": {"enabled": True, "decode_tokens": 50}}),
    ),
    ("placer", "rwt-prefix", {"weight": 1}, "qlm", "stages.placer.params.weight"),
    # evictor
    ("evictor", "none", {}, "router", F()),
    ("evictor", "none", {}, "qlm", F(options={"lso": {"evict": False}})),
    (
        "evictor",
        "qlm",
        {"weigh_cost": True},
        "qlm",
        F(options={"lso": {"evict": True}, "eviction": {"weigh_cost": True}}),
    ),
    ("evictor", "qlm", {}, "router", NOT_HERE),
    # shedder
    ("shedder", "none", {}, "router", F()),
    ("shedder", "none", {}, "qlm", F(options={"tenancy": {"shed": False}})),
    (
        "shedder",
        "sheddable",
        {"shed_backlog_factor": 2.0},
        "qlm",
        F(options={"tenancy": {"shed": True, "shed_backlog_factor": 2.0}}),
    ),
    ("shedder", "sheddable", {}, "router", NOT_HERE),
    # batch former
    ("batch_former", "vllm", {}, "router", VLLM_ENGINE),
    ("batch_former", "vllm", {}, "qlm", VLLM_ENGINE),
    ("batch_former", "vllm", {}, "batching", NOT_HERE),
    ("batch_former", "scorpio", {}, "qlm", SCORPIO_ON),
    (
        "batch_former",
        "scorpio",
        {"vbs_untargeted_free": True},
        "router",
        F(scorpio={"credit_batching": True, "vbs_admission": True, "vbs_untargeted_free": True}),
    ),
    ("batch_former", "scorpio", {"ttft_guard": False}, "qlm", "stages.batch_former.params"),
    ("batch_former", "scorpio", {}, "batching", NOT_HERE),
    *[
        ("batch_former", former, {}, "batching", F(policy="batching", options={"former": former}))
        for former in ("fifo", "odbs", "scls-dp", "slo-dbs", "slo-odbs", "slo-odbs-paper")
    ],
    (
        "batch_former",
        "scls-dp",
        {"slice_iterations": 50},
        "batching",
        F(policy="batching", options={"former": "scls-dp", "slice_iterations": 50}),
    ),
    ("batch_former", "fifo", {}, "router", NOT_HERE),
    ("batch_former", "slo-odbs", {"ttft": 1}, "batching", "stages.batch_former.params.ttft"),
    # engine stages: every family, no parameters
    *[
        (stage, name, {}, family, F(fields={key: name}))
        for stage, key, names in (
            ("engine_queue", "queue_policy", ("edf", "fcfs", "oracle-edf", "priority")),
            ("engine_mode", "engine_mode", ("continuous", "static")),
            ("preemption", "preemption_mode", ("auto", "recompute", "swap")),
        )
        for name in names
        for family in ("router", "qlm", "batching")
    ],
    ("engine_queue", "edf", {"x": 1}, "qlm", "stages.engine_queue.params.x"),
    ("preemption", "swap", {"x": 1}, "qlm", "stages.preemption.params.x"),
    # length source
    *[
        ("length_source", name, {}, family, F(fields={"length_predictor": name}))
        for name in ("online-histogram", "learned")
        for family in ("router", "qlm", "batching")
    ],
    ("length_source", "oracle", {}, "router", F()),
    ("length_source", "oracle", {}, "qlm", F(options={"lengths": "true"})),
    ("length_source", "oracle", {}, "batching", F(options={"lengths": "true"})),
    ("length_source", "hints", {}, "batching", F(options={"lengths": "hints"})),
    ("length_source", "hints", {}, "qlm", NOT_HERE),
    ("length_source", "learned", {"x": 1}, "qlm", "stages.length_source.params.x"),
]


def _id(row: Row) -> str:
    stage, name, params, family, _ = row
    return f"{stage}/{name}-{family}" + ("-" + "-".join(params) if params else "")


@pytest.mark.parametrize(
    ("stage", "name", "params", "family", "expected"), [pytest.param(*r, id=_id(r)) for r in ROWS]
)
def test_plugin_row(
    stage: str, name: str, params: dict[str, Any], family: str, expected: Fragment | str
) -> None:
    if isinstance(expected, str):
        with pytest.raises(StageError) as err:
            create_plugin(stage, name, params).fragment(family)
        assert expected in str(err.value)
        assert str(err.value).startswith(f"stages.{stage}")
    else:
        plugin = create_plugin(stage, name, params)
        assert (plugin.stage, plugin.name) == (stage, name)
        assert plugin.fragment(family) == expected
