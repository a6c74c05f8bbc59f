"""Autoscaling policies (services/scheduler/core/autoscale/): table-driven decisions."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from pydantic import ValidationError

from services.scheduler.core.autoscale.base import DelayRule
from services.scheduler.core.autoscale.config import AutoscaleConfig
from services.scheduler.core.autoscale.registry import SCALING_POLICIES, create_scaling_policy
from services.scheduler.core.autoscale.signal import ModelLoad, QueuedWork, predicted_attainment
from services.scheduler.core.autoscale.tracker import LoadTracker
from shared.policy import UnknownNameError

THETA = 1000.0
"""Tokens/s per replica; with 100 output tokens a replica serves 10 requests/s."""


def load(
    now: float = 0.0,
    *,
    ready: int = 1,
    starting: int = 0,
    rate: float = 0.0,
    trend: float = 0.0,
    ongoing: float = 0.0,
    queue: tuple[QueuedWork, ...] = (),
    startup: float = 30.0,
) -> ModelLoad:
    return ModelLoad(
        model="m",
        now_s=now,
        ready_replicas=ready,
        starting_replicas=starting,
        ongoing_requests=ongoing,
        arrival_rate_rps=rate,
        arrival_trend_rps_s=trend,
        mean_output_tokens=100.0,
        replica_tokens_s=THETA,
        prefill_s=0.0,
        replica_startup_s=startup,
        queue=queue,
    )


def backlog(n: int, slack_s: float) -> tuple[QueuedWork, ...]:
    return tuple(QueuedWork(slack_s, 100.0) for _ in range(n))


@pytest.mark.parametrize(
    ("queue", "ready", "replicas", "startup", "expected"),
    [
        ((), 1, 1, 30.0, 1.0),
        # 10 requests x 100 tokens at 1000 tok/s: the k-th waits 0.1·(k-1) s; slack 0.45 s: 5 meet
        (backlog(10, 0.45), 1, 1, 30.0, 0.5),
        # a second replica that is ready at once halves every wait: 10 meet (0.45 s vs 0.45 s)
        (backlog(10, 0.45), 2, 2, 0.0, 1.0),
        # the same second replica still starting (30 s) helps nobody within 0.45 s
        (backlog(10, 0.45), 1, 2, 30.0, 0.5),
        # no replica ready: every wait is at least the start-up time
        (backlog(4, 10.0), 0, 2, 30.0, 0.0),
    ],
)
def test_predicted_attainment(
    queue: tuple[QueuedWork, ...], ready: int, replicas: int, startup: float, expected: float
) -> None:
    got = predicted_attainment(load(ready=ready, queue=queue, startup=startup), replicas, z=0.0)
    assert got == pytest.approx(expected)


@pytest.mark.parametrize(
    ("case", "ld", "expected"),
    [
        ("idle stays at the minimum", load(), 1),
        ("demand 25 r/s at 90% of 10 r/s per replica needs 3", load(rate=25.0), 3),
        (
            "trend: 17 r/s rising 0.5 r/s per s over 40 s is 37 r/s -> 5",
            load(rate=17, trend=0.5),
            5,
        ),
        ("a falling trend is not extrapolated", load(rate=17, trend=-0.5), 2),
        ("bounded by max_replicas", load(rate=1000.0), 16),
        (
            "backlog of 400 requests due in 10 s needs 4 even with no arrivals",
            load(queue=backlog(400, 10.0), startup=0.0),
            4,
        ),
        ("in the hysteresis band (fits 3 at 90%, not at 70%) holds", load(ready=3, rate=22.0), 3),
    ],
)
def test_slo_policy_decisions(case: str, ld: ModelLoad, expected: int) -> None:
    policy = create_scaling_policy(AutoscaleConfig(policy="slo", slo={"slo_percentile": 0.6}))
    assert policy.decide(ld).replicas == expected, case


def test_slo_policy_scales_down_only_after_the_delay_and_not_while_starting() -> None:
    cfg = AutoscaleConfig(policy="slo", slo={"scale_down_delay_s": 60.0})
    policy = create_scaling_policy(cfg)
    assert policy.decide(load(0.0, ready=1, rate=40.0)).replicas == 5  # scale-up at t=0
    # load gone at once: held while the window still holds the peak (and a replica starts)
    assert policy.decide(load(10.0, ready=1, starting=4, rate=1.0)).replicas == 5
    assert policy.decide(load(40.0, ready=5, rate=1.0)).replicas == 5
    # 60 s after the last scale-up the window only holds 1 r/s: down to 1
    assert policy.decide(load(70.0, ready=5, rate=1.0)).replicas == 1


def test_slo_policy_does_not_scale_down_below_what_the_queue_needs() -> None:
    cfg = AutoscaleConfig(policy="slo", slo={"scale_down_delay_s": 0.0})
    policy = create_scaling_policy(cfg)
    ld = load(100.0, ready=6, rate=0.0, queue=backlog(400, 10.0), startup=0.0)
    assert policy.decide(ld).replicas == 4


def test_slo_policy_reports_predicted_attainment() -> None:
    policy = create_scaling_policy(AutoscaleConfig(policy="slo", slo={"slo_percentile": 0.6}))
    d = policy.decide(load(queue=backlog(10, 0.45)))
    assert d.predicted_attainment is not None and d.predicted_attainment < 1.0


@pytest.mark.parametrize(
    ("samples", "expected"),
    [
        # (time, ongoing, replicas ready) ... -> final decision; target 10, upscale delay 30 s
        ([(0, 35, 1)], 1),  # wanted for 0 s
        ([(0, 35, 1), (10, 35, 1), (20, 35, 1), (30, 35, 1)], 4),  # wanted for 30 s
        # interrupted at 40 s (the 30 s average is 5): the timer restarts at 50 s
        ([(0, 35, 1), (40, 5, 1), (50, 35, 1), (60, 35, 1), (70, 35, 1)], 1),
        # look-back 30 s: one spike among quiet samples averages below the target
        ([(0, 0, 1), (10, 0, 1), (20, 0, 1), (30, 30, 1)], 1),
        # scale-down waits downscale_delay_s (600 s)
        ([(t, 5, 4) for t in range(0, 600, 10)], 4),
        ([(t, 5, 4) for t in range(0, 610, 10)], 1),
    ],
)
def test_ongoing_requests_policy(samples: list[tuple[int, int, int]], expected: int) -> None:
    cfg = AutoscaleConfig(
        policy="ongoing-requests", ongoing_requests={"target_ongoing_requests": 10}
    )
    policy = create_scaling_policy(cfg)
    got = None
    for t, ongoing, ready in samples:
        got = policy.decide(load(float(t), ready=ready, ongoing=float(ongoing))).replicas
    assert got == expected


def test_fixed_policy_and_registry() -> None:
    fixed = create_scaling_policy(AutoscaleConfig(policy="fixed", fixed={"replicas": 3}))
    assert fixed.decide(load(rate=1000.0)).replicas == 3
    assert fixed.decide(load(ready=7)).replicas == 3
    assert SCALING_POLICIES.names() == ["fixed", "ongoing-requests", "slo"]
    with pytest.raises(UnknownNameError, match="valid: fixed, ongoing-requests, slo"):
        create_scaling_policy(AutoscaleConfig(policy="queue-length"))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"min_replicas": 5, "max_replicas": 2}, "min_replicas must be <= max_replicas"),
        ({"slo": {"scale_down_utilization": 0.9}}, "scale_down_utilization must be <"),
        ({"slo": {"target_attainment": 1.5}}, "target_attainment"),
        ({"interval_s": 0}, "interval_s"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_config_rejects_bad_values_naming_the_field(fields: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        AutoscaleConfig.model_validate(fields)


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([(0, 3)], 1),
        ([(0, 3), (5, 3)], 1),
        ([(0, 3), (10, 3)], 3),
        ([(0, 3), (5, 1), (10, 3), (15, 3)], 1),  # direction interrupted
        ([(0, 0), (20, 0)], 0),  # down after 20 s
    ],
)
def test_delay_rule(steps: list[tuple[int, int]], expected: int) -> None:
    rule = DelayRule(upscale_delay_s=10.0, downscale_delay_s=20.0)
    got = None
    for t, desired in steps:
        got = rule.apply(desired, 1, float(t))
    assert got == expected


def test_load_tracker_rate_trend_and_lengths() -> None:
    tr = LoadTracker("m", window_s=10.0, prior_output_tokens=50.0, trend_window_s=100.0)
    assert tr.mean_output_tokens == 50.0
    snaps = []
    for k in range(6):  # the rate rises 1 r/s every 10 s
        for j in range(10 * (k + 1)):
            tr.arrival(10.0 * k + j / (k + 1))
        snaps.append(
            tr.snapshot(
                10.0 * k + 10.0,
                ready=1,
                starting=0,
                ongoing=0.0,
                queue_slacks_s=[3.0, 1.0],
                replica_tokens_s=THETA,
                prefill_s=0.1,
                startup_s=5.0,
            )
        )
    last = snaps[-1]
    assert last.arrival_rate_rps == pytest.approx(6.0)
    assert last.arrival_trend_rps_s == pytest.approx(0.1)
    assert [q.slack_s for q in last.queue] == [1.0, 3.0]
    tr.finished(80)
    tr.finished(120)
    assert tr.mean_output_tokens == 100.0 and math.isclose(tr.var_output_tokens, 800.0)


def test_model_load_rejects_bad_numbers() -> None:
    with pytest.raises(ValueError, match="replica_tokens_s"):
        replace(load(), replica_tokens_s=0.0)
    with pytest.raises(ValueError, match="ready_replicas"):
        replace(load(), ready_replicas=-1)
