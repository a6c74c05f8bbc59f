"""A stack on the live mesh: applied to the Serve config as written, or refused naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from services.scheduler.args import SchedulerArgs
from services.scheduler.core.batching.config import BatchingConfig
from slomesh.launch import mesh
from slomesh.stacks import load_stack
from slomesh.stacks.live import StackRefused, apply_stack


def _config(engine: str = "vllm") -> dict[str, Any]:
    config = mesh.load_config(mesh.CONFIGS[engine])
    if engine in mesh.DEFAULT_PROFILES:
        config = mesh.with_profiles(config, [mesh.DEFAULT_PROFILES[engine]])
    return config


def _apps(stack: str, engine: str = "vllm") -> dict[str, dict[str, Any]]:
    config = apply_stack(_config(engine), load_stack(stack))
    return {a["name"]: a["args"] for a in config["applications"]}


@pytest.mark.parametrize(
    ("stack", "engine", "field"),
    [
        ("slomesh-swap", "vllm", "stages.preemption: 'auto'"),
        ("qlm", "vllm", "stages.preemption"),
        ("scls", "vllm", "stages.length_source"),
        ("scls-continuous", "vllm", "stages.length_source: 'online-histogram'"),
        ("sls", "vllm", "stages.engine_mode: 'static'"),
        ("oracle", "simulated", "stages.length_source: 'oracle'"),
        ("qlm-true-lengths", "simulated", "stages.length_source"),
    ],
)
def test_live_refuses_what_it_cannot_run(stack: str, engine: str, field: str) -> None:
    with pytest.raises(StackRefused, match=f"stack '{stack}': {field}"):
        apply_stack(_config(engine), load_stack(stack))


def test_live_refuses_vbs_without_a_decode_profile() -> None:
    bare = mesh.load_config(mesh.CONFIGS["vllm"])
    with pytest.raises(StackRefused, match=r"stages\.batch_former\.params\.vbs_admission"):
        apply_stack(bare, load_stack("scorpio"))


def test_live_scorpio_runs_its_ttft_guard_at_admission() -> None:
    apps = _apps("scorpio")
    sched = SchedulerArgs.model_validate(apps["scheduler"])
    assert sched.ttft_guard.enabled and sched.policy == "least-loaded"
    assert sched.stack == "scorpio"
    replicas = [name for name in apps if name.startswith("replica-")]
    assert replicas  # every replica of the shipped config, however many it lists
    for name in replicas:
        engine = apps[name]["vllm"]
        assert engine["queue_policy"] == "edf"
        assert engine["scorpio"]["ttft_guard"] is False  # the scheduler runs it
        assert engine["scorpio"]["credit_batching"] and engine["scorpio"]["vbs_admission"]
    assert apps["predictor"]["predictor"] == "online-histogram"


def test_live_vllm_fcfs_runs_plain_engines_without_admission() -> None:
    apps = _apps("vllm-fcfs")
    assert apps["scheduler"]["policy"] == "round-robin"
    assert apps["scheduler"]["ttft_guard"]["enabled"] is False
    replicas = [name for name in apps if name.startswith("replica-")]
    assert replicas and {apps[r]["vllm"]["queue_policy"] for r in replicas} == {"fcfs"}
    assert "scorpio" not in apps["replica-0"]["vllm"]
    # it queues overload as vLLM does: the stack's in-flight cap, not the config's
    cap = load_stack("vllm-fcfs").max_in_flight_per_replica
    assert cap is not None and apps["scheduler"]["max_in_flight_per_replica"] == cap
    assert _apps("slomesh")["scheduler"]["max_in_flight_per_replica"] == 64  # local.yaml's


@pytest.mark.parametrize(
    ("stack", "former", "slice_iterations"),
    [
        ("scls-live", "scls-dp", 128),
        ("slo-odbs-live", "slo-odbs", None),
        ("fifo-batching-live", "fifo", None),
    ],
)
def test_live_batching_stacks(stack: str, former: str, slice_iterations: int | None) -> None:
    apps = _apps(stack)
    cfg = BatchingConfig.model_validate(apps["scheduler"]["policy_options"])
    assert (cfg.former, cfg.slice_iterations) == (former, slice_iterations)
    assert (cfg.lengths, cfg.min_interval_s, cfg.reform_on_slice_end) == ("hints", 0.5, True)
    assert apps["replica-0"]["vllm"]["queue_policy"] == "edf"


def test_vllm_runs_the_flagship() -> None:
    apps = _apps("slomesh")
    assert apps["scheduler"]["stack"] == "slomesh"
    assert apps["scheduler"]["ttft_guard"]["enabled"] is True
    # the flagship's engines run no SCORPIO (credit batching and VBS admission off); its
    # ablations' SCORPIO settings reach the vLLM replicas as written
    assert "scorpio" not in apps["replica-0"]["vllm"]
    vbs = _apps("slomesh-vbs")["replica-0"]["vllm"]["scorpio"]
    assert (vbs["credit_batching"], vbs["vbs_admission"], vbs["vbs_untargeted_free"]) == (
        False,
        True,
        True,
    )
    assert _apps("slomesh-credit")["replica-0"]["vllm"]["scorpio"]["credit_batching"] is True


def test_simulated_replicas_run_the_engine_stages_as_written() -> None:
    apps = _apps("slomesh-swap", "simulated")
    engine = apps["replica-0"]["engine_config"]
    assert (engine["mode"], engine["preemption_mode"], engine["queue_policy"]) == (
        "continuous",
        "auto",
        "edf",
    )
    assert apps["scheduler"]["policy_options"]["prefix"]["enabled"] is True


def test_live_stack_file_by_path(tmp_path: Path) -> None:
    path = tmp_path / "live.yaml"
    path.write_text("extends: slomesh\nname: mine\nstages:\n  preemption: recompute\n")
    config = apply_stack(_config(), load_stack(str(path)))
    sched = next(a for a in config["applications"] if a["name"] == "scheduler")
    assert sched["args"]["stack"] == "mine"


def test_vllm_runs_qlm_by_recompute() -> None:
    apps = _apps("qlm-recompute")
    assert apps["scheduler"]["policy"] == "qlm" and apps["scheduler"]["stack"] == "qlm-recompute"
    assert "scorpio" not in apps["replica-0"]["vllm"]


@pytest.mark.parametrize(
    ("deadline_aware", "engine"), [(True, "vllm"), (False, "vllm"), (True, "simulated")]
)
def test_replicas_list_waiting_requests_only_for_a_deadline_aware_guard(
    tmp_path: Path, deadline_aware: bool, engine: str
) -> None:
    path = tmp_path / "aware.yaml"
    path.write_text(
        "extends: edf\nname: aware\nstages:\n  admitter:\n    plugin: ttft-guard\n"
        f"    params: {{deadline_aware: {str(deadline_aware).lower()}}}\n"
    )
    config = apply_stack(_config(engine), load_stack(str(path)))
    apps = {a["name"]: a["args"] for a in config["applications"]}
    key = "vllm" if engine == "vllm" else "engine_config"
    assert apps["scheduler"]["ttft_guard"]["deadline_aware"] is deadline_aware
    assert apps["replica-0"][key]["report_waiting_prefill"] is deadline_aware
    assert _apps("scorpio")["replica-0"]["vllm"]["report_waiting_prefill"] is False
    assert _apps("slomesh")["replica-0"]["vllm"]["report_waiting_prefill"] is True


def test_slomesh_up_config_gets_the_shipped_profile_of_its_vllm_replicas(tmp_path: Path) -> None:
    adapters = mesh.load_config(mesh.DEPLOY_DIR / "local-many-adapters.yaml")
    path = tmp_path / "adapters-vbs.yaml"  # VBS admission needs the replicas' decode profile
    path.write_text(
        "extends: slomesh-adapters\nname: adapters-vbs\nstages:\n"
        "  batch_former: {plugin: scorpio, params: {vbs_admission: true}}\n"
    )
    with pytest.raises(StackRefused, match="vbs_admission"):  # no decode profile: refused
        apply_stack(adapters, load_stack(str(path)))
    shipped = mesh.shipped_profiles(adapters)
    assert shipped == [mesh.DEFAULT_PROFILES["vllm"]]
    config = apply_stack(mesh.with_profiles(adapters, shipped), load_stack(str(path)))
    replica = next(a for a in config["applications"] if a["name"] == "replica-0")
    assert len(replica["args"]["vllm"]["decode_coeffs"]) == 4
    assert mesh.shipped_profiles(mesh.load_config(mesh.CONFIGS["simulated"])) == []
