"""The fidelity experiment: calibrate the simulated engine on the serving engine, then compare.

1. Calibrate (optional). Replay a calibration trace of every shape (seeds other than the
   evaluation's) on vLLM with its step recorder on; fit the step model and the front-end
   overheads on that log (slomesh/profiling/serving_fit.py) into a profile.
2. Evaluate. For each trace shape, replay the evaluation trace `repeats` times on vLLM and once on
   the simulated engine with the profile; per-request errors against the median vLLM run, and
   vLLM's own noise (run 2 against run 1) beside them.

Scripts that call this need an `if __name__ == "__main__":` guard (vLLM spawns its engine core).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from services.replica.vllm.config import VLLMEngineConfig
from shared.domain import HardwareProfile
from slomesh.profiling.serving_fit import ServingFit, apply_fit, fit_serving, load_step_log
from slomesh.sim.fidelity import MetricError, compare, median_timings
from slomesh.sim.replay import replay_sim, sim_engine_config
from slomesh.sim.trace import TraceRequest, TraceSpec, concatenate, make_trace, shaped_spec
from slomesh.sim.vllm_replay import EngineLimits, VLLMReplay, replay_vllm

CALIBRATION_SEED_OFFSET = 1000
"""Calibration traces use seed + this: the profile never sees the evaluation's requests."""
CALIBRATION_GAP_S = 5.0


@dataclass(frozen=True, slots=True)
class TraceResult:
    name: str
    spec: TraceSpec
    errors: list[MetricError]
    noise: list[MetricError] | None
    limits: EngineLimits
    wall_s: list[float]
    max_lateness_s: float

    def error(self, metric: str, noise: bool = False) -> float | None:
        rows = self.noise if noise else self.errors
        if rows is None:
            return None
        return next(e.median_abs_err for e in rows if e.metric == metric)


def shaped_traces(
    shapes: Sequence[str], requests: int, rate_rps: float, seed: int, max_model_len: int
) -> list[tuple[str, TraceSpec, list[TraceRequest]]]:
    out = []
    for name in shapes:
        spec = shaped_spec(
            name, requests=requests, rate_rps=rate_rps, seed=seed, max_model_len=max_model_len
        )
        out.append((name, spec, make_trace(spec)))
    return out


def _client_times(
    replay: VLLMReplay, trace: Sequence[TraceRequest]
) -> tuple[dict[str, float], dict[str, float]]:
    """Per vLLM request id: submission time and first-token time, on the perf_counter clock."""
    submitted: dict[str, float] = {}
    first: dict[str, float] = {}
    for k, run in enumerate(replay.runs):
        for t in run:
            rid = replay.id_prefixes[k] + t.request_id
            due = replay.start_s[k] + t.arrival_s
            submitted[rid] = due
            first[rid] = due + t.ttft_s
    return submitted, first


def calibrate(
    base: HardwareProfile,
    config: VLLMEngineConfig,
    shapes: Sequence[str],
    *,
    requests: int,
    rate_rps: float,
    seed: int,
    torch_threads: int | None,
) -> tuple[HardwareProfile, ServingFit]:
    """`base` with step coefficients and overheads fitted on vLLM serving calibration traces."""
    cal_seed = seed + CALIBRATION_SEED_OFFSET
    max_model_len = config.max_model_len or 2048  # the CLI always sets it
    parts = shaped_traces(shapes, requests, rate_rps, cal_seed, max_model_len)
    trace = concatenate([t for _, _, t in parts], CALIBRATION_GAP_S)
    with tempfile.TemporaryDirectory(prefix="slomesh-steps-") as tmp:
        log_path = Path(tmp) / "steps.jsonl"
        real = replay_vllm(
            trace, config, seed=cal_seed, torch_threads=torch_threads, step_log=log_path
        )
        log = load_step_log(log_path)
    submitted, first = _client_times(real, trace)
    fit = fit_serving(log, submitted, first)
    return apply_fit(base, fit), fit


def evaluate(
    profile: HardwareProfile,
    config: VLLMEngineConfig,
    traces: Sequence[tuple[str, TraceSpec, list[TraceRequest]]],
    *,
    seed: int,
    repeats: int,
    torch_threads: int | None,
) -> list[TraceResult]:
    out = []
    for name, spec, trace in traces:
        real = replay_vllm(trace, config, seed=seed, torch_threads=torch_threads, repeats=repeats)
        lim = real.limits
        sim_config = sim_engine_config(
            lim.max_num_seqs, lim.max_num_batched_tokens, lim.block_size_tokens
        )
        sim = replay_sim(trace, profile, sim_config)
        errors = compare(median_timings(real.runs), sim)
        noise = compare(real.runs[0], real.runs[1]) if repeats > 1 else None
        out.append(TraceResult(name, spec, errors, noise, lim, real.wall_s, real.max_lateness_s))
    return out


def fidelity_json(results: Sequence[TraceResult]) -> dict[str, object]:
    """DIR/fidelity.json's document (errors as fractions, 0.10 = 10%)."""
    return {
        "traces": [
            {
                "name": r.name,
                "ttft_median_abs_err": r.error("TTFT"),
                "e2e_median_abs_err": r.error("E2E"),
                "tpot_median_abs_err": r.error("TPOT"),
                "noise_ttft_median_abs_err": r.error("TTFT", noise=True),
                "noise_e2e_median_abs_err": r.error("E2E", noise=True),
            }
            for r in results
        ]
    }
