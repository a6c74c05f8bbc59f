"""The learned predictor's p90 calibration (conformal.py): the stretch around the median, the
per-model quantile tracking on streams of known distributions, the file format and old files."""

from __future__ import annotations

import numpy as np
import pytest
from learned_fixtures import long_prompt, request, short_prompt

from services.predictor.core.learned import codec
from services.predictor.core.learned.conformal import (
    ConformalConfig,
    OnlineConformal,
    log_medians,
    p90_misses,
    warp_probs,
)
from services.predictor.core.learned.predictor import LearnedConfig, LearnedPredictor
from services.predictor.core.learned.training import HALF_OCTAVE_BUCKET_UPPER_TOKENS as UPPER
from services.predictor.online import predict_then_observe

_LOWS = np.concatenate([[1.0], np.asarray(UPPER[:-1], dtype=np.float64)])
CENTRES = np.sqrt(_LOWS * np.asarray(UPPER, dtype=np.float64))


def lognormal_probs(median: float, sigma: float) -> np.ndarray:
    """Bucket probabilities of a log-normal length (the last bucket takes the tail)."""
    from scipy.stats import norm

    cdf = norm.cdf((np.log(np.asarray(UPPER, dtype=np.float64)) - np.log(median)) / sigma)
    cdf[-1] = 1.0
    return np.maximum(np.diff(np.concatenate([[0.0], cdf])), 1e-4)[None, :]


def p90_of(probs: np.ndarray) -> float:
    """The log length where the CDF (linear in log u) reaches 0.9."""
    grid = np.concatenate([[0.0], np.log(np.asarray(UPPER, dtype=np.float64))])
    cdf = np.concatenate([[0.0], np.cumsum(probs[0] / probs[0].sum())])
    return float(np.interp(0.9, cdf, grid))


@pytest.mark.parametrize("scale", [0.0, 0.5, -0.5, 1.0])
def test_stretch_keeps_the_median_and_moves_p90_by_e_to_the_scale(scale: float) -> None:
    probs = lognormal_probs(200.0, 0.6)
    probs /= probs.sum()
    got = warp_probs(UPPER, probs, np.asarray([scale]))
    assert got.sum() == pytest.approx(1.0)
    m = float(log_medians(UPPER, probs)[0])
    assert float(log_medians(UPPER, got)[0]) == pytest.approx(m, abs=0.02)
    assert p90_of(got) - m == pytest.approx(np.exp(scale) * (p90_of(probs) - m), rel=0.1)
    if scale == 0.0:
        assert got is probs


def test_stretch_handles_rows_independently() -> None:
    a, b = lognormal_probs(50.0, 0.4), lognormal_probs(900.0, 0.8)
    both = np.vstack([a / a.sum(), b / b.sum()])
    got = warp_probs(UPPER, both, np.asarray([0.0, 0.7]))
    assert got[0] == pytest.approx(both[0])
    assert got[1] == pytest.approx(warp_probs(UPPER, both[1:], np.asarray([0.7]))[0])


@pytest.mark.parametrize(
    ("true_median", "true_sigma", "why"),
    [
        (200.0, 0.6, "already calibrated: stays near 90%"),
        (200.0, 1.2, "predicted too narrow (starts near 75%): widens"),
        (200.0, 0.25, "predicted too wide (starts near 99.99%): narrows"),
        (320.0, 0.6, "level too low: widens until p90 covers"),
        (120.0, 0.6, "level too high: narrows"),
    ],
)
def test_tracking_brings_p90_coverage_into_the_band(
    true_median: float, true_sigma: float, why: str
) -> None:
    """A fixed predicted log-normal (median 200, sigma 0.6) against true lengths drawn from a
    known log-normal: after the first half the tracked p90 covers 85-95% of the lengths."""
    rng = np.random.default_rng(7)
    prior = lognormal_probs(200.0, 0.6)
    prior /= prior.sum()
    tracker = OnlineConformal(ConformalConfig())
    misses = []
    for y in np.exp(rng.normal(np.log(true_median), true_sigma, size=1200)):
        served = warp_probs(UPPER, prior, np.asarray([tracker.scale("m")]))
        missed = bool(p90_misses(UPPER, served, CENTRES, np.asarray([y]))[0])
        misses.append(missed)
        tracker.observe("m", missed)
    coverage = 1.0 - float(np.mean(misses[600:]))
    assert 0.85 <= coverage <= 0.95, why


def test_tracking_is_per_model_bounded_and_forgets_the_least_recent() -> None:
    tracker = OnlineConformal(
        ConformalConfig(step=0.5, shared_step=0.0, max_scale=0.8, max_models=2)
    )
    for _ in range(20):  # misses: +0.5 x 0.9 each; hits: -0.5 x 0.1 each
        tracker.observe("wide", True)
        tracker.observe("narrow", False)
    assert tracker.scale("wide") == pytest.approx(0.8)  # bounded
    assert tracker.scale("narrow") == pytest.approx(-0.8)
    tracker.observe("third", False)
    assert "wide" not in tracker.scales and tracker.scale("wide") == 0.0


@pytest.mark.parametrize(("missed", "sign"), [(True, 1.0), (False, -1.0)])
def test_a_new_model_starts_from_the_shared_part(missed: bool, sign: float) -> None:
    tracker = OnlineConformal(ConformalConfig(step=0.1, shared_step=0.05))
    for _ in range(20):
        tracker.observe("old", missed)
    assert sign * tracker.scale("new") > 0.0  # inherited from the shared part only
    assert abs(tracker.scale("new")) < abs(tracker.scale("old"))
    restored = OnlineConformal(ConformalConfig(step=0.1, shared_step=0.05))
    restored.load_dict(tracker.to_dict())
    assert restored.scale("new") == tracker.scale("new")


def _stream(n: int, seed: int) -> list[tuple[str, int]]:
    """(prompt, tokens) of a new model whose lengths spread far wider than the training data's:
    log-normal around 400 (essays) and 40 (yes/no) with sigma 0.8."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        essay = bool(rng.integers(2))
        prompt = (long_prompt if essay else short_prompt)(f"topic {i % 50}")
        out.append(
            (prompt, max(1, round(float(np.exp(rng.normal(np.log(400 if essay else 40), 0.8))))))
        )
    return out


def _coverage(model: LearnedPredictor, lines: list[tuple[str, int]]) -> float:
    """p90 coverage over the second half of a predict-then-observe run (the live path)."""
    hits = []
    for i, (prompt, tokens) in enumerate(lines):
        req = request(model="newbie", prompt=prompt, request_id=f"line-{i}")
        hits.append(tokens <= predict_then_observe(model, req, prompt, tokens).p90_tokens)
    return float(np.mean(hits[len(hits) // 2 :]))


def test_the_live_path_calibrates_a_new_models_p90(trained_small: LearnedPredictor) -> None:
    data = trained_small.to_bytes()
    on = LearnedPredictor.from_bytes(data, LearnedConfig())
    off = LearnedPredictor.from_bytes(data, LearnedConfig(conformal={"enabled": False}))
    lines = _stream(600, seed=3)
    cov_on, cov_off = _coverage(on, lines), _coverage(off, lines)
    assert 0.85 <= cov_on <= 0.95
    assert abs(cov_on - 0.9) < abs(cov_off - 0.9)


def test_state_round_trips_and_format_3_files_start_unstretched(
    trained_small: LearnedPredictor,
) -> None:
    model = LearnedPredictor.from_bytes(trained_small.to_bytes())
    _coverage(model, _stream(120, seed=5))
    assert model.conformal is not None and model.conformal.scale("newbie") != 0.0
    again = LearnedPredictor.from_bytes(model.to_bytes())
    probe = request(model="newbie", prompt=short_prompt("cats"), request_id="probe")
    assert again.conformal is not None
    assert again.conformal.scales == model.conformal.scales
    assert again.predict(probe, short_prompt("cats")).p90_tokens == pytest.approx(
        model.predict(probe, short_prompt("cats")).p90_tokens
    )
    arrays, meta = codec.decode(model.to_bytes())
    assert meta["format_version"] == 4
    v3 = LearnedPredictor.from_bytes(codec.encode(arrays, {**meta, "format_version": 3}))
    assert v3.conformal is not None and v3.conformal.scales == {}
    unstretched = LearnedPredictor.from_bytes(
        model.to_bytes(), LearnedConfig(conformal={"enabled": False})
    )
    got = v3.predict(probe, short_prompt("cats")).p90_tokens
    assert got == pytest.approx(unstretched.predict(probe, short_prompt("cats")).p90_tokens)


@pytest.mark.parametrize(
    ("scales", "error"),
    [
        ("not a list", "conformal.scales must be a list"),
        ([["m", float("nan")]], r"conformal.scales\[0\] must be finite"),
    ],
)
def test_bad_conformal_state_is_refused(scales: object, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        OnlineConformal(ConformalConfig()).load_dict({"scales": scales})


@pytest.mark.parametrize("true_temperature", [0.7, 1.0, 1.6])
def test_temperature_fit_recovers_a_known_spread(true_temperature: float) -> None:
    """Lengths drawn so that P(length > u_k) = sigmoid(logit_k / T0) exactly: the fitted T is
    near T0 and its p90 covers about 90%."""
    from services.predictor.core.learned.calibration import cdf_at, fit_temperature
    from services.predictor.core.learned.ordinal import OrdinalSGD

    rng = np.random.default_rng(11)
    n, upper = 4000, np.asarray(UPPER, dtype=np.float64)
    level = rng.uniform(np.log(40.0), np.log(800.0), size=n)
    logits = (level[:, None] - np.log(upper[:-1])[None, :]) * 2.0
    eps = rng.logistic(size=n)
    tokens = np.maximum(1, np.round(np.exp(level + true_temperature / 2.0 * eps))).astype(np.int64)
    ordinal = OrdinalSGD(len(UPPER), 1, 1e-4, 0)
    got = fit_temperature(logits, tokens, ordinal, UPPER, CENTRES, (0.88, 0.92))
    assert got == pytest.approx(true_temperature, rel=0.15)
    p = ordinal.probs_from_logits(logits, got)
    assert 0.88 <= float(np.mean(cdf_at(UPPER, p, CENTRES, tokens.astype(float)) <= 0.9)) <= 0.92
