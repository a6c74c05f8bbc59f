"""Profiling the simulated engine: the sweep on SimEngineCore, on virtual time.

The simulated engine runs a known HardwareProfile (the roofline default of a catalog GPU and
model unless one is given), so the fitted coefficients must give that profile back: the check
that the sweep, the fit and the engine's step accounting agree. Memory and link figures cannot
be measured on a simulation; they are taken from the profile the engine runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from services.profiler.core.profile_fit import EngineFacts, FittedProfile, fit_sweep
from services.profiler.core.runner import run_sweep
from services.profiler.core.sweep import SweepSettings, plan_sweep, required_batched_tokens
from shared.domain import HardwareProfile
from shared.domain.engine import EngineConfig
from shared.profiles import default_profile
from slomesh.sim.sweep_engine import SimSweepEngine

DEFAULT_MAX_NUM_SEQS = 256
"""The simulated engine's default (EngineConfig's, vLLM's online-serving default)."""


def sim_config(
    settings: SweepSettings, profile: HardwareProfile, max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
) -> EngineConfig:
    """The simulated engine's settings for a sweep: the token budget raised to the largest point."""
    budget = required_batched_tokens(settings, max_num_seqs, profile.kv_capacity_tokens)
    return EngineConfig(
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max(EngineConfig().max_num_batched_tokens, budget),
    )


def profile_simulated(
    gpu: str,
    model: str,
    settings: SweepSettings,
    *,
    truth: HardwareProfile | None = None,
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS,
    progress: Callable[[str], None] | None = None,
) -> FittedProfile:
    """Sweep the simulated engine running `truth` (default: the roofline profile of `model` on
    `gpu`) and fit its profile."""
    t0 = time.perf_counter()
    prof = truth if truth is not None else default_profile(gpu, model)
    engine = SimSweepEngine(prof, sim_config(settings, prof, max_num_seqs))
    plan = plan_sweep(engine.limits, settings)
    if progress is not None:
        progress(
            f"simulated {prof.model} on {prof.gpu}: {len(plan.runs)} runs "
            f"({len(plan.prefill)} prefill + {len(plan.decode)} decode points)"
        )
    measured = run_sweep(engine, plan, progress)
    facts = EngineFacts(
        gpu=prof.gpu,
        model=prof.model,
        tensor_parallel=prof.tensor_parallel,
        kv_capacity_bytes=prof.kv_capacity_bytes,
        kv_bytes_per_token=prof.kv_bytes_per_token,
        weight_bytes=prof.weight_bytes,
        swap_bytes_s=prof.swap_bytes_s,
        cold_load_bytes_s=prof.cold_load_bytes_s,
    )
    fitted = fit_sweep(measured, facts, "simulated", SimSweepEngine)
    fitted.report["engine_info"] = {
        "engine": "simulated",
        "profile_source": prof.source,
        "clock": "virtual",
        "memory_and_links": "copied from the simulated profile (not measurable)",
    }
    fitted.report["timings_s"]["total"] = time.perf_counter() - t0  # wall; the sweep is virtual
    return fitted
