"""A toy estimator shared by the batch-former tests: numbers easy to check by hand."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from services.scheduler.core.batching.estimator import BatchEstimator
from shared.domain.profile import DecodeCoeffs, HardwareProfile, PrefillCoeffs


def make_toy_estimator(kv_tokens: int = 1000) -> BatchEstimator:
    """T_serve(N, L, S) = 0.01·N·S seconds; a request of context L decoded S steps holds L+S
    tokens of a `kv_tokens` cache (so 5 requests of 100 + 100 fit 1000 tokens)."""
    profile = HardwareProfile(
        gpu="toy",
        model="toy",
        tensor_parallel=1,
        prefill=PrefillCoeffs(0.0, 0.0, 0.0, 0.0),
        decode=DecodeCoeffs(0.0, 0.01, 0.0, 0.0),
        kv_capacity_bytes=kv_tokens,
        kv_bytes_per_token=1,
        weight_bytes=1,
        swap_bytes_s=1.0,
        cold_load_bytes_s=1.0,
        source="test",
    )
    return BatchEstimator(profile, memory_fraction=1.0)


@pytest.fixture
def toy_estimator() -> Callable[..., BatchEstimator]:
    return make_toy_estimator
