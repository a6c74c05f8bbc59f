"""lengths-prompts: a tiny run has every arm, hints only where meant, held-out prompts only."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.predictor.data import DEFAULT_DATA_DIR
from services.predictor.model_store import load_model
from slomesh.bench.experiments import EXPERIMENTS, ExperimentArgs
from slomesh.bench.experiments.lengths_prompts import (
    MAX_TOKENS,
    SERVED_MODEL,
    LengthsPrompts,
    arms,
    build_workload,
    heldout_split,
)

pytestmark = pytest.mark.skipif(
    not DEFAULT_DATA_DIR.is_dir(), reason=f"llm-responses data not at {DEFAULT_DATA_DIR}"
)

TINY = 60


def test_workload_is_heldout_and_hints_only_in_hint_arms() -> None:
    model = load_model()
    train, heldout, split = heldout_split(model)
    assert split["train_matches_model"] and split["heldout_matches_model"]
    wl = build_workload(heldout, TINY, seed=1, model=model)
    train_prompts = {ex.prompt for ex in train}
    assert len(wl.examples) == TINY
    assert not any(ex.prompt in train_prompts for ex in wl.examples)
    assert all(h is not None for h in wl.hints)
    for arm in arms(with_qlm=True):
        reqs = wl.at_rate(50.0, arm.hints)
        assert len(reqs) == TINY
        assert all(r.model == SERVED_MODEL and r.max_tokens == MAX_TOKENS for r in reqs)
        assert all((r.length_hint is not None) == arm.hints for r in reqs)
        assert all(r.true_output_tokens is not None for r in reqs)
    assert [a.hints for a in arms()] == [True, False, False]


def test_tiny_run_has_three_arms(tmp_path: Path) -> None:
    exp = EXPERIMENTS.create("lengths-prompts")
    assert isinstance(exp, LengthsPrompts)
    args = ExperimentArgs(out_dir=tmp_path, seed=1, requests=TINY, max_points=1)
    lines: list[str] = []
    data = exp.run(args, echo=lines.append)
    assert data["requests"] == TINY and data["rates_rps"] == [25.0]
    by_arm = {p["stack"]: p for p in data["points"]}
    assert {"slomesh+hints", "slomesh (histogram)", "slomesh-true-lengths"} <= set(by_arm)
    for name, p in by_arm.items():
        assert p["requests"] == TINY
        assert p["hinted_requests"] == (TINY if name.endswith("+hints") else 0)
        assert 0.0 <= p["slo_attainment"] <= 1.0
    metrics = {m["predictor"]: m for m in data["predictor_metrics"]}
    assert metrics["learned (prompt)"]["n"] == TINY
    assert (tmp_path / "summary.md").is_file() and (tmp_path / data["figures"][0]).is_file()
