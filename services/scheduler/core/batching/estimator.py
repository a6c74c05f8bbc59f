"""Serving-time and memory estimators for a batch on one instance type (SCLS §4.2-4.3).

T_serve(N, L, S) = T_prefill(N, L) + Σ_{k=1..S} tau_decode(L+k, N) comes from the hardware
profile's fitted coefficients (shared.profiles.fit fits them from measurements). Memory: a padded
batch of N requests decoded S steps holds N·(L+S) tokens of KV, so the largest batch that fits is
N_max = floor(ζ·M_kv / (Δ·(L+S))) with M_kv the profile's KV capacity and Δ bytes per token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from shared.domain import HardwareProfile
from shared.profiles.fit import DecodeSample, PrefillSample, fit_decode, fit_prefill, refit_profile


@dataclass(frozen=True, slots=True)
class BatchEstimator:
    profile: HardwareProfile
    memory_fraction: float = 0.9
    """ζ: the share of the KV capacity a batch may plan to use (headroom for fragmentation)."""
    max_batch_size: int = 256
    """Engine cap on requests per batch, whatever memory allows."""

    def __post_init__(self) -> None:
        if not 0 < self.memory_fraction <= 1:
            raise ValueError(f"memory_fraction must be in (0, 1], got {self.memory_fraction}")
        if self.max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {self.max_batch_size}")

    def serve_time_s(self, n: int, padded_len: int, iterations: int) -> float:
        return self.profile.serve_time_s(n, padded_len, iterations)

    def max_batch(self, padded_len: int, iterations: int) -> int:
        """Most requests a batch padded to `padded_len` and decoded `iterations` steps may hold."""
        per_request = self.profile.kv_bytes_per_token * (padded_len + iterations)
        by_memory = int(self.memory_fraction * self.profile.kv_capacity_bytes // per_request)
        return max(0, min(self.max_batch_size, by_memory))

    def fits(self, n: int, padded_len: int, iterations: int) -> bool:
        return n <= self.max_batch(padded_len, iterations)


@dataclass(frozen=True, slots=True)
class EstimatorFit:
    """A refitted estimator and the fit quality of each coefficient set (RMSE in seconds)."""

    estimator: BatchEstimator
    prefill_rmse_s: float
    decode_rmse_s: float
    prefill_r2: float
    decode_r2: float


def fit_estimator(
    base: BatchEstimator,
    prefill: Sequence[PrefillSample],
    decode: Sequence[DecodeSample],
) -> EstimatorFit:
    """Refit `base`'s time coefficients from measured steps (memory figures are kept)."""
    p, d = fit_prefill(prefill), fit_decode(decode)
    profile = refit_profile(base.profile, prefill, decode)
    est = BatchEstimator(profile, base.memory_fraction, base.max_batch_size)
    return EstimatorFit(est, p.rmse_s, d.rmse_s, p.r2, d.r2)
