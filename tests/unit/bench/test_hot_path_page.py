"""The hot-path page of `bench-mesh --compare --page`: process titles become roles (vLLM's
engine left out), CPU per request per role, the target's verdict, a baseline beside it."""

from __future__ import annotations

from typing import Any

import pytest

from slomesh.bench.compare.hot_path import (
    idle_ms_per_s,
    idle_per_role_ms_s,
    outside_ms,
    per_role_ms,
    render,
    role_of,
)


@pytest.mark.parametrize(
    ("title", "role"),
    [
        ("ray::ServeReplica:ingress:IngressDeployment", "ingress"),
        ("ray::ServeReplica:replica-1:ReplicaDeployment", "replica shells"),
        ("ray::ServeReplica:scheduler:SchedulerDeployment", "scheduler"),
        ("ray::ServeReplica:predictor:PredictorDeployment", "predictor"),
        ("ray::ServeReplica:deployer:DeployerDeployment", "other services"),
        ("ray::ServeController", "Serve (controller, proxy)"),
        ("gcs_server", "Ray daemons"),
        ("ray::DashboardAgent", "Ray daemons"),
        ("python slomesh.cli.main", "launcher"),
        ("VLLM::EngineCore", None),
    ],
)
def test_roles(title: str, role: str | None) -> None:
    assert role_of(title) == role


def _system(name: str, requests: int, cpu: dict[str, float]) -> dict[str, Any]:
    outside = sum(v for k, v in cpu.items() if role_of(k) is not None)
    return {
        "name": name,
        "ran": True,
        "c8_requests": requests,
        "cpu_outside_engine_s": outside,
        "cpu_by_process_s": cpu,
    }


NOW: dict[str, Any] = {
    "systems": [
        _system("bare-vllm", 1000, {"python vllm.entrypoints": 3.0, "VLLM::EngineCore": 20.0}),
        _system(
            "slomesh",
            500,
            {
                "ray::ServeReplica:ingress:IngressDeployment": 2.0,
                "ray::ServeReplica:replica-0:ReplicaDeployment": 1.0,
                "ray::ServeReplica:replica-1:ReplicaDeployment": 1.5,
                "VLLM::EngineCore": 9.0,
            },
        ),
    ],
    "sitting": {"commit": "abc1234", "started": "2026-01-01 10:00 UTC", "load_before": "1 1 1"},
    "load_average_end": "2 2 2",
}


def test_per_role_ms_sums_processes_of_a_role_per_request() -> None:
    slomesh = NOW["systems"][1]
    assert per_role_ms(slomesh) == {"ingress": 4.0, "replica shells": 5.0}
    assert outside_ms(slomesh) == 9.0


def test_page_names_the_ratio_the_verdict_and_the_baseline() -> None:
    baseline = {
        "systems": [
            _system("bare-vllm", 1000, {"python vllm.entrypoints": 3.0}),
            _system("slomesh", 250, {"ray::ServeReplica:ingress:IngressDeployment": 5.0}),
        ]
    }
    page = render(NOW, "slomesh bench-mesh --compare bare-vllm --page p.md", baseline)
    assert "| slomesh | 500 | 9.00 | 3.00 |" in page
    assert "**not met** (3.0x: 9.00 ms vs 3.00 ms)" in page
    assert "| ingress | 4.00 | 20.00 | -16.00 |" in page
    assert "| slomesh (baseline) | 250 | 20.00 | 6.67 |" in page
    assert "commit `abc1234`" in page and "`slomesh bench-mesh --compare bare-vllm" in page


def test_the_target_is_met_at_two_times_bare() -> None:
    cheap = {
        "systems": [
            _system("bare-vllm", 100, {"python vllm.entrypoints": 1.0}),
            _system("slomesh", 100, {"ray::ServeReplica:ingress:IngressDeployment": 2.0}),
        ]
    }
    assert "**met** (2.0x" in render(cheap, "cmd")


def test_page_gives_each_systems_idle_cpu_per_second() -> None:
    now = {
        "systems": [
            {**NOW["systems"][0], "idle_seconds": 10.0, "idle_cpu_outside_engine_s": 0.05},
            {**NOW["systems"][1], "idle_seconds": 8.0, "idle_cpu_outside_engine_s": 0.8},
        ]
    }
    baseline = {"systems": [_system("slomesh", 250, {"python slomesh.cli.main": 5.0})]}
    page = render(now, "c", baseline)
    assert "| bare-vllm | 1000 | 3.00 | 1.00 | 5.0 |" in page
    assert "| slomesh | 500 | 9.00 | 3.00 | 100.0 |" in page
    assert "| slomesh (baseline) | 250 | 20.00 | 6.67 | - |" in page  # not measured then
    assert idle_ms_per_s({"idle_seconds": 0.0, "idle_cpu_outside_engine_s": 1.0}) is None


def test_role_table_gives_each_roles_idle_cpu_per_second_when_measured_per_process() -> None:
    idle = {
        "ray::ServeReplica:ingress:IngressDeployment": 0.2,
        "ray::ServeReplica:replica-0:ReplicaDeployment": 0.1,
        "ray::ServeReplica:replica-1:ReplicaDeployment": 0.3,
        "VLLM::EngineCore": 5.0,  # the engine: not a role
    }
    slomesh = {**NOW["systems"][1], "idle_seconds": 10.0, "idle_cpu_by_process_s": idle}
    assert idle_per_role_ms_s(slomesh) == pytest.approx({"ingress": 20.0, "replica shells": 40.0})
    page = render({"systems": [NOW["systems"][0], slomesh]}, "c")
    assert "| role | ms/request | idle ms/s |" in page
    assert "| replica shells | 5.00 | 40.0 |" in page
    assert "| **all** | **9.00** | **60.0** |" in page
    # a sitting measured before the breakdown existed: no idle column
    assert "idle ms/s |" not in render(NOW, "c").split("## slomesh by process role")[1]
