"""bench-agree --scenario: the scenario's trace names each request's model, the live config is
the scenario's shipped mesh, and the swap report counts swaps, failures and lost requests."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from shared.metrics.records import RequestRecord
from slomesh.bench.agree.scenario import (
    apply_scenario,
    live_scenario,
    scenario_trace,
    scenario_workload,
    swap_report,
)
from slomesh.cli.bench_agree_live import live_config, replicas_of


def args_for(scenario: str | None) -> argparse.Namespace:
    return argparse.Namespace(
        scenario=scenario,
        profile=Path("unused.json"),
        classes="short:1:3:16:32-128",
        calibrate_requests=40,
        max_num_seqs=2,
        max_num_batched_tokens=512,
        replicas=2,
        qlm_widen=False,
    )


def test_the_trace_is_the_scenarios_workload_with_its_models_and_deadlines() -> None:
    sc = live_scenario("many-models").spec
    trace = scenario_trace(sc, 300, 2.0, seed=0)
    assert len(trace) == 300
    assert {r.model for r in trace} == {"tiny-llama", "tiny-llama-b", "tiny-llama-c"}
    deadline = {r.class_name: r.ttft_s for r in trace}
    assert deadline == {"interactive": 20.0, "batch-1": 60.0, "batch-2": 300.0}
    assert {r.model for r in trace if r.class_name == "interactive"} == {"tiny-llama"}
    assert all(32 <= r.prompt_tokens <= 256 and 1 <= r.output_tokens <= 256 for r in trace)
    assert 100 < trace[-1].arrival_s < 200  # 300 requests at 2 r/s
    assert scenario_trace(sc, 300, 2.0, seed=0) == trace
    assert trace[0].to_request("ignored").model == trace[0].model
    spec = scenario_workload(sc, 300, 2.0)
    assert {c.name: c.ttft_s for c in spec.classes} == deadline


def test_a_scenario_fixes_the_mesh_the_profile_and_turns_calibration_off() -> None:
    args = args_for("many-models")
    scen = apply_scenario(args)
    assert scen is not None and args.scenario_config.name == "local-many-models.yaml"
    assert (args.calibrate_requests, args.max_num_seqs) == (0, 16)
    assert args.profile.name == "cpu-tiny-many.json"
    spec = scenario_workload(scen.spec, 50, 1.0)
    config = live_config(args, spec, "serve-multiplex")
    assert replicas_of(config) == 2
    apps = {a["name"]: a["args"] for a in config["applications"]}
    assert apps["replica-1"]["swap_models"].keys() == {"tiny-llama", "tiny-llama-c"}
    assert apps["scheduler"]["policy"] == "multiplex"
    assert apps["ingress"]["slo"]["classes"]["batch-2"] == {"ttft_ms": 300_000.0}
    without = args_for(None)
    assert apply_scenario(without) is None and without.scenario_config is None


def test_a_scenario_without_a_mesh_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'qlm-wb' has no live mesh; one of: many-models"):
        live_scenario("qlm-wb")


def test_the_swap_report_counts_swaps_failures_and_lost_requests() -> None:
    trace = scenario_trace(live_scenario("many-models").spec, 4, 1.0, seed=0)
    req = [r.to_request("") for r in trace]
    full = RequestRecord.from_request(req[0], None, 1.0, 2.0, trace[0].output_tokens)
    short = RequestRecord.from_request(req[1], None, 1.0, 2.0, trace[1].output_tokens - 1)
    refused = RequestRecord.from_request(req[2], None, None, None, 0, reject_reason="HTTP 429")
    error = RequestRecord.from_request(
        req[3], None, None, None, 0, reject_reason="HTTP 500: replica failed mid-request"
    )
    logs: dict[str, Any] = {
        "replica-0": {
            "swaps": [
                {"from_model": "a", "to_model": "b", "seconds": 20.0, "ok": True},
                {"from_model": "b", "to_model": "c", "seconds": 5.0, "ok": False},
            ],
            "failed_requests": 2,
        },
        "replica-1": {"swaps": [{"from_model": "b", "to_model": "a", "seconds": 30.0, "ok": True}]},
    }
    r = swap_report(
        logs, [full, short, refused, error], trace, {"a": 24.0, "b": 26.0}, {"i0": 3, "i1": 4}
    )
    assert (r["live_swaps"], r["live_swaps_failed"], r["live_swap_median_s"]) == (3, 1, 25.0)
    assert r["profile_over_live"] == pytest.approx(1.0)
    assert (r["failed_requests"], r["lost_requests"], r["rejected_requests"]) == (2, 1, 2)
    assert r["error_requests"] == 1  # the server error, not the 429
    assert r["sim_swaps"] == 7 and r["sim_swaps_by_instance"] == {"i0": 3, "i1": 4}
    nothing = swap_report({}, [], trace, {}, None)
    assert nothing["live_swap_median_s"] is None and nothing["profile_over_live"] is None
