"""Fit the simulated engine's step model on the serving engine's own step timings.

The profiler's sweep times vLLM's `step()` called in isolation; a serving engine steps
differently (its busy loop, output hand-off, other processes on the host), and the simulator has
to match the serving engine. services/replica/vllm/step_recorder.py logs, inside vLLM's engine
core, every step's shape and span plus each request's arrival at the engine and its first-token
step. This module turns such a log (and the client's submission times) into profile coefficients:

- step time. One continuous-batching iteration (schedule, forward, output build) plus the loop's
  gap to the next one is modelled as (shared/domain/profile.py, SCLS Eq. 4-5 plus attention)
      t = d1·Σctx_dec + d2·n_dec + p1·Σc + p2·n_pre + p5·Σc·(k + c) + f + f_pre·[n_pre > 0]
  and fitted by non-negative least squares (scipy.optimize.nnls) over the logged steps, refitted
  once without the 5% of steps that ran slowest against the first fit (host stalls). The
  fixed cost f holds the median inter-step gap of a busy engine; f + f_pre is a prefill step's.
  Mapped onto the profile: d4 = f, p4 = f + f_pre, d3 = p3 = 0 (a mixed step counts min(p4, d4)
  once, which gives back f + f_pre).
- front-end overheads. submit = engine arrival - client submission, delivery = client first
  token - end of the engine's first-token step; the profile carries their medians and the
  simulator adds them (slomesh/sim/replay.py).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from shared.domain import HardwareProfile
from shared.domain.profile import DecodeCoeffs, PrefillCoeffs

FEATURES = ("decode_ctx", "decode_seqs", "prefill_tokens", "prefill_seqs", "attention", "fixed")
FEATURES_PREFILL_FIXED = "prefill_fixed"
TRIM_FRACTION = 0.05
"""Share of steps with the largest positive residual dropped before the final fit."""
BUSY_GAP_MAX_S = 0.002
"""Inter-step gaps at most this long count as the busy loop's own overhead (longer: idle)."""


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One logged engine step: prefill chunks as (new tokens, cached context), decode contexts."""

    start_s: float
    end_s: float
    prefill: tuple[tuple[int, int], ...]
    decode: tuple[int, ...]

    @property
    def busy_s(self) -> float:
        return self.end_s - self.start_s

    def features(self) -> list[float]:
        attention = sum(c * (k + c) for c, k in self.prefill)
        return [
            float(sum(self.decode)),
            float(len(self.decode)),
            float(sum(c for c, _ in self.prefill)),
            float(len(self.prefill)),
            float(attention),
            1.0,
            1.0 if self.prefill else 0.0,
        ]


@dataclass(frozen=True, slots=True)
class StepLog:
    steps: list[StepRecord]
    added_s: dict[str, float]
    """Engine arrival time per request id (vLLM's internal id with its suffix removed)."""
    first_token_s: dict[str, float]


@dataclass(frozen=True, slots=True)
class ServingFit:
    coeffs: dict[str, float]
    rmse_s: float
    r2: float
    steps: int
    busy_gap_s: float
    submit_overhead_s: float
    delivery_overhead_s: float
    overhead_requests: int

    def report(self) -> dict[str, Any]:
        return {
            "coeffs_s": self.coeffs,
            "rmse_s": self.rmse_s,
            "r2": self.r2,
            "steps": self.steps,
            "busy_gap_s": self.busy_gap_s,
            "submit_overhead_s": self.submit_overhead_s,
            "delivery_overhead_s": self.delivery_overhead_s,
            "overhead_requests": self.overhead_requests,
        }


def _external_id(engine_id: str) -> str:
    """vLLM 0.32 appends "-<8 hex>" to the caller's request id inside the engine."""
    head, _, tail = engine_id.rpartition("-")
    if head and len(tail) == 8 and all(ch in "0123456789abcdef" for ch in tail):
        return head
    return engine_id


def parse_step_log(lines: Iterable[str], where: str = "step log") -> StepLog:
    steps, added, first = [], {}, {}
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            e = json.loads(line)
            kind = e["k"]
            if kind == "step":
                steps.append(
                    StepRecord(
                        float(e["t0"]),
                        float(e["t2"]),
                        tuple((int(c), int(k)) for c, k in e["p"]),
                        tuple(int(x) for x in e["d"]),
                    )
                )
            elif kind == "add":
                added[_external_id(str(e["id"]))] = float(e["t"])
            elif kind == "first":
                first[_external_id(str(e["id"]))] = float(e["t"])
            else:
                raise ValueError(f"unknown event kind {kind!r}")
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"{where}:{i + 1}: not a step-log event: {err}") from None
    return StepLog(steps, added, first)


def load_step_log(path: Path) -> StepLog:
    with path.open() as f:
        return parse_step_log(f, str(path))


def busy_gap_s(steps: Sequence[StepRecord]) -> float:
    """Median gap between one step's end and the next one's start while the engine is busy."""
    gaps = [b.start_s - a.end_s for a, b in itertools.pairwise(steps)]
    busy = [g for g in gaps if 0 <= g <= BUSY_GAP_MAX_S]
    return float(np.median(busy)) if busy else 0.0


def fit_steps(steps: Sequence[StepRecord]) -> tuple[dict[str, float], float, float, float]:
    """NNLS fit of the step model; (coefficients, RMSE s, R², busy gap s)."""
    from scipy.optimize import nnls

    if len(steps) < len(FEATURES) + 1:
        raise ValueError(f"need at least {len(FEATURES) + 1} logged steps, got {len(steps)}")
    gap = busy_gap_s(steps)
    x = np.array([s.features() for s in steps], dtype=np.float64)
    y = np.array([s.busy_s for s in steps], dtype=np.float64) + gap
    scale = np.maximum(np.abs(x).max(axis=0), 1e-12)  # condition the columns
    w, _ = nnls(x / scale, y)
    # one trimmed refit: steps stalled by another process on the host (the slowest
    # TRIM_FRACTION of residuals) say nothing about the engine's own cost
    resid = y - (x / scale) @ w
    keep = resid <= np.quantile(resid, 1.0 - TRIM_FRACTION)
    if keep.sum() > len(FEATURES) + 1:
        w, _ = nnls((x / scale)[keep], y[keep])
    w = w / scale
    pred = x @ w
    rmse = float(np.sqrt(np.mean((pred - y) ** 2)))
    var = float(np.var(y))
    r2 = 1.0 - float(np.mean((pred - y) ** 2)) / var if var > 0 else 1.0
    names = (*FEATURES, FEATURES_PREFILL_FIXED)
    return {n: float(v) for n, v in zip(names, w, strict=True)}, rmse, r2, gap


def front_end_overheads(
    log: StepLog, submitted_s: Mapping[str, float], client_first_s: Mapping[str, float]
) -> tuple[float, float, int]:
    """Median (submit, delivery) overheads in seconds over requests seen on both sides."""
    ids = [
        r
        for r in submitted_s
        if r in log.added_s and r in log.first_token_s and r in client_first_s
    ]
    if not ids:
        raise ValueError("no request appears in both the step log and the client's timings")
    submit = [max(0.0, log.added_s[r] - submitted_s[r]) for r in ids]
    deliver = [max(0.0, client_first_s[r] - log.first_token_s[r]) for r in ids]
    return float(np.median(submit)), float(np.median(deliver)), len(ids)


def fit_serving(
    log: StepLog, submitted_s: Mapping[str, float], client_first_s: Mapping[str, float]
) -> ServingFit:
    coeffs, rmse, r2, gap = fit_steps(log.steps)
    submit, deliver, n = front_end_overheads(log, submitted_s, client_first_s)
    return ServingFit(coeffs, rmse, r2, len(log.steps), gap, submit, deliver, n)


def apply_fit(base: HardwareProfile, fit: ServingFit) -> HardwareProfile:
    """`base` (memory, links, ε) with the serving fit's step coefficients and overheads."""
    c = fit.coeffs
    fixed = c["fixed"]
    return replace(
        base,
        prefill=PrefillCoeffs(
            c["prefill_tokens"],
            c["prefill_seqs"],
            0.0,
            fixed + c[FEATURES_PREFILL_FIXED],
            c["attention"],
        ),
        decode=DecodeCoeffs(c["decode_ctx"], c["decode_seqs"], 0.0, fixed),
        submit_overhead_s=fit.submit_overhead_s,
        delivery_overhead_s=fit.delivery_overhead_s,
        source=f"fitted:serving engine step log ({fit.steps} steps)",
    )
