"""The serving-engine fit: recovers known step coefficients and front-end overheads from a log."""

from __future__ import annotations

import json

import numpy as np
import pytest

from shared.profiles import default_profile
from slomesh.profiling.serving_fit import (
    StepLog,
    StepRecord,
    apply_fit,
    busy_gap_s,
    fit_serving,
    fit_steps,
    parse_step_log,
)

TRUE = {
    "decode_ctx": 2e-7,
    "decode_seqs": 1e-4,
    "prefill_tokens": 5e-6,
    "prefill_seqs": 3e-4,
    "attention": 4e-9,
    "fixed": 1e-3,
    "prefill_fixed": 5e-4,
}
GAP_S = 3e-5


def _steps(n: int, seed: int = 0, noise_s: float = 0.0) -> list[StepRecord]:
    rng = np.random.default_rng(seed)
    out, t = [], 0.0
    for _ in range(n):
        prefill = tuple(
            (int(rng.integers(1, 800)), int(rng.integers(0, 400)))
            for _ in range(int(rng.integers(0, 3)))
        )
        decode = tuple(int(x) for x in rng.integers(10, 1500, size=int(rng.integers(0, 9))))
        if not prefill and not decode:
            decode = (100,)
        rec = StepRecord(0.0, 0.0, prefill, decode)
        busy = float(np.dot(rec.features(), list(TRUE.values()))) - GAP_S
        busy += float(rng.normal(0.0, noise_s)) if noise_s else 0.0
        out.append(StepRecord(t, t + busy, prefill, decode))
        t += busy + GAP_S
    return out


def test_fit_steps_recovers_the_coefficients_and_the_loop_gap():
    coeffs, rmse, r2, gap = fit_steps(_steps(400))
    assert gap == pytest.approx(GAP_S, rel=1e-6)
    for name, value in TRUE.items():
        assert coeffs[name] == pytest.approx(value, rel=1e-3, abs=1e-12), name
    assert rmse < 1e-9 and r2 > 0.999999


def test_fit_steps_is_close_under_noise_and_never_negative():
    coeffs, _, r2, _ = fit_steps(_steps(3000, seed=1, noise_s=2e-4))
    assert all(v >= 0 for v in coeffs.values())
    assert coeffs["attention"] == pytest.approx(TRUE["attention"], rel=0.1)
    assert coeffs["fixed"] == pytest.approx(TRUE["fixed"], rel=0.1)
    assert r2 > 0.9


@pytest.mark.parametrize(
    ("gaps", "expected"),
    [([1e-5, 2e-5, 3e-5], 2e-5), ([1e-5, 1.0, 3e-5], 2e-5), ([5.0], 0.0)],
)
def test_busy_gap_ignores_idle_periods(gaps, expected):
    steps, t = [], 0.0
    for g in [*gaps, 0.0]:
        steps.append(StepRecord(t, t + 1e-3, (), (10,)))
        t += 1e-3 + g
    assert busy_gap_s(steps) == pytest.approx(expected)


def test_fit_serving_overheads_are_medians_over_requests_on_both_sides():
    steps = _steps(50)
    log = StepLog(steps, {"a": 10.002, "b": 20.004, "x": 1.0}, {"a": 10.010, "b": 20.020})
    submitted = {"a": 10.0, "b": 20.0, "y": 0.0}
    client_first = {"a": 10.011, "b": 20.023}
    fit = fit_serving(log, submitted, client_first)
    assert fit.overhead_requests == 2
    assert fit.submit_overhead_s == pytest.approx(0.003)
    assert fit.delivery_overhead_s == pytest.approx(0.002)
    with pytest.raises(ValueError, match="no request appears in both"):
        fit_serving(StepLog(steps, {}, {}), submitted, client_first)


def test_apply_fit_gives_the_step_model_back_through_the_profile():
    fit = fit_serving(StepLog(_steps(300), {"a": 1.0}, {"a": 1.01}), {"a": 0.999}, {"a": 1.012})
    p = apply_fit(default_profile("A100-80GB", "llama-3.1-8b"), fit)
    for rec in _steps(20, seed=7):
        attention = sum(c * (k + c) for c, k in rec.prefill)
        predicted = p.step_time_s(
            sum(c for c, _ in rec.prefill),
            len(rec.prefill),
            max((c + k for c, k in rec.prefill), default=0),
            len(rec.decode),
            sum(rec.decode),
            attention,
        )
        assert predicted == pytest.approx(rec.busy_s + GAP_S, rel=1e-3)
    assert p.submit_overhead_s == pytest.approx(0.001)
    assert p.delivery_overhead_s == pytest.approx(0.002)
    assert p.source.startswith("fitted:serving engine step log")


def test_parse_step_log_strips_vllm_id_suffixes_and_names_bad_lines():
    lines = [
        json.dumps({"k": "add", "id": "run1-t003-a9685c3a", "t": 1.0}),
        json.dumps({"k": "step", "t0": 1.0, "t2": 1.5, "p": [[64, 0]], "d": [5]}),
        json.dumps({"k": "first", "id": "t004-deadbeef", "t": 1.5}),
        json.dumps({"k": "add", "id": "no-suffix", "t": 2.0}),
    ]
    log = parse_step_log(lines)
    assert log.added_s == {"run1-t003": 1.0, "no-suffix": 2.0}
    assert log.first_token_s == {"t004": 1.5}
    assert log.steps[0].prefill == ((64, 0),) and log.steps[0].busy_s == 0.5
    with pytest.raises(ValueError, match=r"steps\.jsonl:2: not a step-log event"):
        parse_step_log([lines[0], '{"k": "step"}'], "steps.jsonl")
    with pytest.raises(ValueError, match="unknown event kind"):
        parse_step_log(['{"k": "nope"}'])
