"""The serving stacks registry: what each baseline fixes."""

from __future__ import annotations

import pytest

from services.replica.core.queue_policies import QUEUE_POLICIES
from services.scheduler.core.global_policy import GlobalPolicy, RoutingPolicy
from shared.policy.registry import UnknownNameError
from slomesh.stacks import STACKS


@pytest.mark.parametrize(
    ("name", "router", "queue", "mode", "preemption"),
    [
        ("vllm-fcfs", "round-robin", "fcfs", "continuous", "recompute"),
        ("edf", "least-loaded", "edf", "continuous", "recompute"),
        ("sls", "round-robin", "fcfs", "static", "recompute"),
        ("oracle", "oracle-ttft", "oracle-edf", "continuous", "auto"),
        ("prefix-only", "prefix-only", "fcfs", "continuous", "recompute"),
    ],
)
def test_scheduler_stack_definitions(name, router, queue, mode, preemption):
    stack = STACKS.create(name)
    assert stack.name == name and stack.description
    assert stack.queue_policy == queue
    assert (stack.engine_mode, stack.preemption_mode) == (mode, preemption)
    QUEUE_POLICIES.check(stack.queue_policy)
    policy = stack.global_policy()
    assert isinstance(policy, RoutingPolicy)
    assert policy.router.name == router
    # every run gets fresh policy state (round-robin counters are not shared between runs)
    assert stack.global_policy() is not policy
    assert stack.global_policy().router is not policy.router


def test_scheduler_stack_registry_names():
    assert {"edf", "oracle", "sls", "vllm-fcfs", "qlm", "qlm-no-evict"} <= set(STACKS.names())
    with pytest.raises(
        UnknownNameError,
        match="unknown stack 'qlmx'; valid: edf, fifo-batching, fifo-batching-continuous, ",
    ):
        STACKS.create("qlmx")


def test_scheduler_global_policy_step_end_default_is_noop(fakes):
    policy = STACKS.create("edf").global_policy()
    assert isinstance(policy, GlobalPolicy)
    inst = fakes.instance("i0")
    assert policy.on_step_end(inst, fakes.rejector(), 1.0) is None
    assert inst.submitted == []


@pytest.mark.parametrize(
    ("name", "lengths", "scorpio"),
    [
        ("slomesh", "LengthEstimator", True),
        ("slomesh-true-lengths", "TrueLengths", True),
        ("slomesh-no-scorpio", "LengthEstimator", False),
    ],
)
def test_scheduler_slomesh_stacks_length_source(name, lengths, scorpio):
    from services.scheduler.core.prefix_pinning import PrefixPinnedPolicy
    from services.scheduler.core.qlm.policy import QLMPolicy

    stack = STACKS.create(name)
    policy = stack.global_policy()
    assert isinstance(policy, PrefixPinnedPolicy)  # prefix-cache-aware placement around QLM
    policy = policy.inner
    assert isinstance(policy, QLMPolicy)
    assert type(policy.lengths).__name__ == lengths
    assert (stack.scorpio is not None) == scorpio


@pytest.mark.parametrize(
    ("name", "prefix"),
    [("slomesh", True), ("slomesh-no-prefix", False), ("slomesh-no-qlm", False), ("qlm", False)],
)
def test_scheduler_stacks_prefix_aware_placement(name, prefix):
    from services.scheduler.core.prefix_pinning import PrefixPinnedPolicy

    stack = STACKS.create(name)
    assert isinstance(stack.global_policy(), PrefixPinnedPolicy) == prefix
