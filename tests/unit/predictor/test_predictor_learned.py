"""The learned length predictor: distributions, prompt awareness, online learning, persistence."""

from __future__ import annotations

import json

import numpy as np
import pytest
from learned_fixtures import (
    TOPICS,
    long_prompt,
    request,
    short_prompt,
    synthetic_examples,
)

from services.predictor.core import LengthPredictor, create_predictor, restore_predictor
from services.predictor.core.learned import codec
from services.predictor.core.learned.calibration import cdf_at
from services.predictor.core.learned.dataset import split_by_prompt, split_folds
from services.predictor.core.learned.history import LengthHistory
from services.predictor.core.learned.predictor import LearnedConfig, LearnedPredictor
from services.predictor.core.learned.training import HALF_OCTAVE_BUCKET_UPPER_TOKENS
from shared.domain.length_distribution import summarize
from shared.policy import UnknownNameError

NEW_TOPICS = ["gardening", "submarines", "origami", "comets"]


@pytest.mark.parametrize("max_tokens", [1, 5, 16, 100, 700, 8192, 20000])
@pytest.mark.parametrize("prompt", [None, long_prompt("tea"), short_prompt("tea")])
def test_distribution_is_sane_and_capped(
    trained_small: LearnedPredictor, max_tokens: int, prompt: str | None
) -> None:
    d = trained_small.predict(request(max_tokens=max_tokens, prompt=prompt or ""), prompt)
    assert d.bucket_upper_tokens == trained_small.upper
    assert abs(sum(d.bucket_probs) - 1.0) < 1e-9
    assert min(d.bucket_probs) >= 0.0
    cap = min(max_tokens, trained_small.upper[-1])
    assert 0.0 <= d.p50_tokens <= d.p90_tokens <= cap + 1e-9
    assert 0.0 <= d.mean_tokens <= cap + 1e-9
    assert d.version == trained_small.version


def test_is_a_length_predictor_built_by_name(trained_small: LearnedPredictor) -> None:
    assert isinstance(trained_small, LengthPredictor)
    assert trained_small.name == "learned"


@pytest.mark.parametrize("topic", NEW_TOPICS)
def test_ranks_unseen_prompts_by_their_wording(trained_small: LearnedPredictor, topic: str) -> None:
    essay = trained_small.predict(request(prompt=long_prompt(topic)), long_prompt(topic))
    yes_no = trained_small.predict(request(prompt=short_prompt(topic)), short_prompt(topic))
    assert essay.mean_tokens > 10 * yes_no.mean_tokens
    assert essay.p50_tokens > 500 > 50 > yes_no.p50_tokens


def test_predict_batch_matches_predict(trained_small: LearnedPredictor) -> None:
    prompts = [long_prompt("comets"), None, short_prompt("comets")]
    caps = (8192, 64, 300)
    reqs = [request(prompt=p or "", max_tokens=m) for p, m in zip(prompts, caps, strict=True)]
    batch = trained_small.predict_batch(reqs, prompts)
    one = [trained_small.predict(r, p) for r, p in zip(reqs, prompts, strict=True)]
    assert batch == one


def drift(p: LearnedPredictor, n: int, tokens: int, cached: bool) -> None:
    """n completions of yes/no prompts on m1 that now take `tokens` tokens."""
    for i in range(n):
        prompt = short_prompt(TOPICS[i % len(TOPICS)])
        r = request(prompt=prompt, request_id=f"d{i}")
        if cached:
            p.predict(r, prompt)
        p.observe(r, tokens)


@pytest.mark.parametrize("cached", [True, False], ids=["predicted-first", "observe-only"])
def test_online_learning_follows_drift(small: LearnedPredictor, cached: bool) -> None:
    """Predicted requests are learned with their prompt features; requests observed without a
    prediction (no prompt known) teach the prompt-less rows."""
    prompt = short_prompt("submarines") if cached else None
    before = small.predict(request(prompt=prompt or ""), prompt).mean_tokens
    w_before = small.ordinal.weights()[0].copy()
    drift(small, 160, 600, cached)
    after = small.predict(request(prompt=prompt or ""), prompt).mean_tokens
    assert small.online_batches == 160 // small.config.online_batch_size
    assert not np.array_equal(w_before, small.ordinal.weights()[0])
    assert abs(after - 600) < 0.5 * abs(before - 600), (before, after)
    assert small.observations == 160


def test_partial_fit_alone_moves_predictions(small: LearnedPredictor) -> None:
    """With the history features held still, the weights' online updates still follow drift."""
    history = small.history.to_dict()
    prompt = short_prompt("origami")
    before = small.predict(request(prompt=prompt), prompt).mean_tokens
    drift(small, 128, 600, cached=True)
    small.history = LengthHistory.from_dict(history)
    assert small.predict(request(prompt=prompt), prompt).mean_tokens > 5 * before


def test_version_counts_online_observations(small: LearnedPredictor) -> None:
    v0 = small.version
    assert v0 == f"learned:{small.model_id}+0"
    small.observe(request(), 20)
    assert small.version == f"learned:{small.model_id}+1" != v0
    assert small.predict(request()).version == small.version


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "7"])
def test_observe_rejects_bad_lengths(small: LearnedPredictor, bad: object) -> None:
    with pytest.raises(ValueError, match="output_tokens"):
        small.observe(request(), bad)  # type: ignore[arg-type]


def probe(p: LearnedPredictor) -> list[object]:
    prompts = [long_prompt("comets"), short_prompt("comets"), None]
    reqs = [request(prompt=q or "", tenant="t1", max_tokens=900) for q in prompts]
    return list(p.predict_batch(reqs, prompts))


def test_persistence_round_trip_predicts_identically(small: LearnedPredictor) -> None:
    drift(small, 37, 300, cached=True)  # one online batch learned, 5 pending
    copy_ = LearnedPredictor.from_bytes(small.to_bytes(), small.config)
    assert probe(copy_) == probe(small)
    assert copy_.version == small.version and copy_.metadata() == small.metadata()
    # the pending mini-batch came along: the same further updates keep them identical
    drift(small, 40, 50, cached=False)
    drift(copy_, 40, 50, cached=False)
    assert probe(copy_) == probe(small)


def test_state_round_trip_through_json(small: LearnedPredictor) -> None:
    drift(small, 10, 300, cached=True)
    state = json.loads(json.dumps(small.state()))
    assert state["version"] == small.version
    restored = restore_predictor(state)
    assert isinstance(restored, LearnedPredictor)
    assert probe(restored) == probe(small)
    assert restored.state()["metadata"] == state["metadata"]


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"not a zip", "not a readable"),
        (
            codec.encode({}, {"format_version": 99}),
            "format_version must be one of \\[1, 2, 3, 4\\]",
        ),
        (codec.encode({}, {"format": "other"}), "format must be"),
    ],
)
def test_model_file_checks_format(data: bytes, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        codec.decode(data)


def test_model_file_of_another_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="kind must be 'learned'"):
        LearnedPredictor.from_bytes(codec.encode({}, {"kind": "other"}))


def test_registry_lists_both_and_unknown_names_list_them() -> None:
    with pytest.raises(UnknownNameError, match="valid: learned, online-histogram") as exc:
        create_predictor("nope")
    assert exc.value.valid == ["learned", "online-histogram"]


def test_learned_config_rejects_unknown_keys() -> None:
    with pytest.raises(ValueError, match="extra"):
        create_predictor("learned", {"bogus": 1})
    with pytest.raises(ValueError, match="model_path: no model file"):
        create_predictor("learned", {"model_path": "/nonexistent/model.npz"})


def test_split_by_prompt_never_shares_a_prompt() -> None:
    examples = synthetic_examples(0) + synthetic_examples(1)
    train, test = split_by_prompt(examples, 0.25, seed=3)
    assert len(train) + len(test) == len(examples)
    assert {e.prompt for e in train}.isdisjoint({e.prompt for e in test})
    assert 0.1 < len(test) / len(examples) < 0.45
    assert split_by_prompt(examples, 0.25, seed=3) == (train, test)
    assert split_by_prompt(examples, 0.25, seed=4) != (train, test)
    folds = split_folds(examples, 3, seed=3)
    assert sum(len(f) for f in folds) == len(examples)
    prompts = [{e.prompt for e in f} for f in folds]
    assert all(a.isdisjoint(b) for i, a in enumerate(prompts) for b in prompts[i + 1 :])


def test_history_decays_and_shrinks_by_hand() -> None:
    h = LengthHistory(global_mean=1.0, half_life_observations=1.0, prior_strength=2.0)
    h.observe("t", "m", 10)
    h.observe("t", "m", 1000)
    n, s = 0.5 * 1 + 1, 0.5 * np.log(10) + np.log(1000)  # decay 2^-1 per observation
    assert h.models["m"] == pytest.approx((n, s))
    m_model = (s + 2.0 * 1.0) / (n + 2.0)
    m_tenant = (s + 2.0 * m_model) / (n + 2.0)
    feats = h.features(["t", "other"], ["m", "m"])
    assert feats[0] == pytest.approx([m_tenant - 1.0, n / (n + 2), n / (n + 2)])
    assert feats[1] == pytest.approx([m_model - 1.0, n / (n + 2), 0.0])
    assert h.features(["t"], ["cold"])[0] == pytest.approx([0.0, 0.0, 0.0])
    assert LengthHistory.from_dict(json.loads(json.dumps(h.to_dict()))).to_dict() == h.to_dict()


def test_cdf_at_matches_summarize_quantiles() -> None:
    upper = HALF_OCTAVE_BUCKET_UPPER_TOKENS
    rng = np.random.default_rng(0)
    centres = (np.asarray([0, *upper[:-1]]) * 0.6 + np.asarray(upper) * 0.4).astype(float)
    for _ in range(50):
        probs = rng.dirichlet(np.full(len(upper), 0.3))
        d = summarize(upper, probs, centres, None, "v")
        q = cdf_at(upper, probs[None], centres, np.asarray([d.p50_tokens, d.p90_tokens]))
        assert q == pytest.approx([0.5, 0.9], abs=1e-6)


def test_runtime_config_is_validated() -> None:
    with pytest.raises(ValueError, match="online_batch_size"):
        LearnedConfig(online_batch_size=0)
