"""The online-histogram length predictor: prior, per-key learning, drift, capping, persistence."""

from __future__ import annotations

import json

import numpy as np
import pytest

from services.predictor.core import (
    DEFAULT_BUCKET_UPPER_TOKENS,
    LengthPredictor,
    OnlineHistogramConfig,
    OnlineHistogramPredictor,
    restore_predictor,
    seed_prior,
)
from shared.domain import SLO, Request
from shared.workloads import load_azure_trace

N_BUCKETS = len(DEFAULT_BUCKET_UPPER_TOKENS)


def req(model: str = "m", slo_class: str = "interactive", max_tokens: int = 8192) -> Request:
    return Request(
        request_id="r",
        model=model,
        input_tokens=100,
        max_tokens=max_tokens,
        arrival_s=0.0,
        slo=SLO(ttft_deadline_s=1.0, class_name=slo_class),
    )


def make(**overrides: object) -> OnlineHistogramPredictor:
    return OnlineHistogramPredictor(OnlineHistogramConfig.model_validate(overrides))


def feed(p: OnlineHistogramPredictor, r: Request, centre: int, n: int, spread: int = 10) -> None:
    for i in range(n):
        p.observe(r, centre - spread // 2 + i % (spread + 1))


def test_satisfies_protocol() -> None:
    assert isinstance(make(seed_prior="uniform"), LengthPredictor)


@pytest.mark.parametrize(
    ("seed", "expected_probs"),
    [
        ("uniform", np.full(N_BUCKETS, 1.0 / N_BUCKETS)),
        ("azure-conv", seed_prior("azure-conv", DEFAULT_BUCKET_UPPER_TOKENS).probs),
    ],
)
def test_cold_start_returns_the_seed_prior(seed: str, expected_probs: np.ndarray) -> None:
    d = make(seed_prior=seed).predict(req())
    np.testing.assert_allclose(d.bucket_probs, expected_probs, atol=1e-12)
    assert d.version.endswith("obs-0")


def test_azure_prior_matches_the_trace() -> None:
    out = load_azure_trace("conv").output_tokens
    d = make(seed_prior="azure-conv").predict(req())
    # bucket centres are trace means and smoothing adds 10 pseudo-counts to ~19k: mean ~ trace mean
    assert d.mean_tokens == pytest.approx(float(out.mean()), rel=0.02)
    assert 64 < d.p50_tokens <= 256  # trace median 129
    uniform = make(seed_prior="uniform").predict(req())
    assert uniform.mean_tokens > 1000  # the midpoints of log buckets: far above chat lengths


def test_custom_seed_probs_override_the_named_prior() -> None:
    probs = (0.0,) * 5 + (1.0,) + (0.0,) * (N_BUCKETS - 6)
    d = make(seed_prior_probs=probs).predict(req())
    assert d.bucket_probs[5] == pytest.approx(1.0)
    assert 256 < d.p50_tokens <= 512


def test_learns_one_key_and_leaves_a_warm_other_key_alone() -> None:
    p = make(seed_prior="uniform", half_life_observations=100)
    hot, other = req("m", "interactive"), req("m", "batch")
    feed(p, other, 1000, 300)
    before_other = p.predict(other)
    cold_before = p.predict(hot)
    feed(p, hot, 100, 500)
    after = p.predict(hot)
    assert abs(cold_before.p50_tokens - 100) > 100  # it really moved
    assert after.p50_tokens == pytest.approx(100, abs=10)
    # the mean keeps prior_strength (10) pseudo-observations of the global histogram, which saw
    # the 1000-token key too: ~6% of the weight at ESS ~144
    assert after.mean_tokens == pytest.approx(100, rel=0.3)
    assert after.mean_tokens < cold_before.mean_tokens / 4
    after_other = p.predict(other)
    # only its prior share (10 pseudo-obs against ~126 of its own) sees the global shift
    assert after_other.p50_tokens == pytest.approx(before_other.p50_tokens, rel=0.05)
    assert after_other.p50_tokens == pytest.approx(1000, rel=0.1)


def test_cold_key_falls_back_to_the_global_histogram() -> None:
    p = make(seed_prior="uniform", seed_strength=10)
    feed(p, req("m", "interactive"), 100, 2000)
    cold = p.predict(req("other-model", "batch"))
    assert cold.p50_tokens == pytest.approx(100, abs=15)  # the global histogram learned it too


@pytest.mark.parametrize(
    ("half_life", "n_after_switch", "moved"),
    [
        (50, 150, True),  # 3 half-lives: the old regime weighs 1/8
        (100_000, 150, False),  # practically no forgetting: 1000 old samples dominate
    ],
)
def test_decay_follows_drift(half_life: float, n_after_switch: int, moved: bool) -> None:
    p = make(seed_prior="uniform", half_life_observations=half_life)
    r = req()
    feed(p, r, 100, 1000)
    assert p.predict(r).mean_tokens < 150
    feed(p, r, 500, n_after_switch)
    mean = p.predict(r).mean_tokens
    assert (mean > 400) is moved
    if not moved:
        assert mean < 250


@pytest.mark.parametrize("max_tokens", [1, 16, 50, 100, 128, 300, 1000, 5000])
def test_max_tokens_caps_quantiles_mean_and_buckets(max_tokens: int) -> None:
    p = make(seed_prior="uniform")
    feed(p, req(), 2000, 200)
    d = p.predict(req(max_tokens=max_tokens))
    assert d.mean_tokens <= max_tokens
    assert d.p50_tokens <= d.p90_tokens <= max_tokens
    top = next(i for i, b in enumerate(d.bucket_upper_tokens) if max_tokens <= b)
    assert all(prob == 0.0 for prob in d.bucket_probs[top + 1 :])
    if max_tokens < 2000 - 10:  # nearly all mass sat above the cap: it piles up at max_tokens
        assert d.p50_tokens == pytest.approx(max_tokens)
        assert d.mean_tokens == pytest.approx(max_tokens, rel=0.05)


def test_cap_above_everything_changes_nothing() -> None:
    p = make(seed_prior="uniform")
    feed(p, req(), 300, 100)
    assert p.predict(req(max_tokens=8192)) == p.predict(req(max_tokens=100_000))


@pytest.mark.parametrize("seed", ["uniform", "azure-conv", "azure-code"])
@pytest.mark.parametrize("max_tokens", [7, 256, 3000, 9000])
def test_bucket_probs_sum_to_one(seed: str, max_tokens: int) -> None:
    p = make(seed_prior=seed)
    for n in (0, 37):
        feed(p, req(), 700, n)
        d = p.predict(req(max_tokens=max_tokens))
        assert sum(d.bucket_probs) == pytest.approx(1.0, abs=1e-9)
        assert all(prob >= 0 for prob in d.bucket_probs)
        assert len(d.bucket_probs) == len(d.bucket_upper_tokens) == N_BUCKETS


def test_state_round_trips_through_json() -> None:
    p = make(seed_prior="azure-code", half_life_observations=30)
    feed(p, req("a", "interactive"), 80, 57)
    feed(p, req("b", "batch-1"), 3000, 13)
    p.observe(req("a", "interactive"), 20_000)  # above the last bound
    state = json.loads(json.dumps(p.state()))
    q = restore_predictor(state)
    assert isinstance(q, OnlineHistogramPredictor)
    assert q.observations == p.observations == 71
    assert q.state() == p.state()
    for r in (req("a", "interactive", 100), req("b", "batch-1"), req("cold", "x")):
        assert q.predict(r) == p.predict(r)
    feed(p, req("a", "interactive"), 400, 5)
    feed(q, req("a", "interactive"), 400, 5)
    assert q.predict(req("a", "interactive")) == p.predict(req("a", "interactive"))


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda s: s.update(state_version=99), "state_version"),
        (lambda s: s.update(kind="other"), "kind"),
        (lambda s: s["global"].update(counts=[1.0]), "global"),
    ],
)
def test_bad_state_is_refused(mutate: object, field: str) -> None:
    p = make(seed_prior="uniform")
    p.observe(req(), 10)
    state = p.state()
    mutate(state)  # type: ignore[operator]
    with pytest.raises(ValueError, match=field):
        OnlineHistogramPredictor.from_state(state)


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_observe_rejects_bad_lengths(bad: object) -> None:
    with pytest.raises(ValueError, match="output_tokens"):
        make(seed_prior="uniform").observe(req(), bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "overrides",
    [
        {"bucket_upper_tokens": (16, 8, 32)},
        {"bucket_upper_tokens": ()},
        {"half_life_observations": 0},
        {"seed_prior_probs": (1.0, 2.0)},
        {"seed_prior": "sharegpt"},
        {"no_such_knob": 1},
    ],
)
def test_config_validation(overrides: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        OnlineHistogramConfig.model_validate(overrides)
