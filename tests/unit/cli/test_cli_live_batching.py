"""`slomesh up --policy` / `bench-live` with batch-forming stacks: what the live mesh runs
(slomesh/cli/mesh.py LIVE_BATCHING_OPTIONS, LIVE_BATCHING_QUEUE_POLICY; issue 15)."""

from __future__ import annotations

from typing import Any

import pytest

from services.scheduler.core.batching.config import BatchingConfig
from slomesh.cli import mesh


def _apps(policy: str) -> dict[str, dict[str, Any]]:
    config = mesh.with_policy(mesh.load_config(mesh.CONFIGS["vllm"]), policy)
    return {a["name"]: a["args"] for a in config["applications"]}


@pytest.mark.parametrize(
    ("stack", "former", "slice_iterations", "queue"),
    [
        ("scls", "scls-dp", 128, "edf"),
        ("slo-odbs", "slo-odbs", None, "edf"),
        ("slomesh-static", "scls-dp", 128, "edf"),
        ("fifo-batching", "fifo", None, "edf"),
        ("vllm-fcfs", None, None, "fcfs"),  # not a batching stack: untouched
    ],
)
def test_live_batching_stack_config(
    stack: str, former: str | None, slice_iterations: int | None, queue: str
) -> None:
    apps = _apps(stack)
    replicas = [a for name, a in apps.items() if name.startswith("replica-")]
    assert {r["vllm"]["queue_policy"] for r in replicas} == {queue}
    options = apps["scheduler"]["policy_options"]
    if former is None:
        assert "lengths" not in options
        return
    cfg = BatchingConfig.model_validate(options)  # the scheduler accepts it
    assert (cfg.former, cfg.slice_iterations) == (former, slice_iterations)
    assert (cfg.lengths, cfg.min_interval_s, cfg.reform_on_slice_end) == ("hints", 0.5, True)


def test_live_policy_options_keep_true_lengths_and_stack_values() -> None:
    assert mesh.live_policy_options("batching", {"lengths": "true"}) == {"lengths": "true"}
    assert mesh.live_policy_options("batching", {"min_interval_s": 2.0})["min_interval_s"] == 2.0
    assert mesh.live_policy_options("qlm", {"x": 1}) == {"x": 1}
