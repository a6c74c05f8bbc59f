"""The sweep plan: sized to the engine's limits, identifiable, or a clear error."""

from __future__ import annotations

import numpy as np
import pytest

from services.profiler.core.sweep import (
    FULL,
    QUICK,
    EngineLimits,
    SweepSettings,
    decode_fits,
    plan_sweep,
    prefill_fits,
    required_batched_tokens,
)

ROOMY = EngineLimits(
    max_num_seqs=256,
    max_num_batched_tokens=1 << 20,
    kv_capacity_tokens=1 << 22,
    max_model_len=1 << 16,
    block_size_tokens=16,
)


def limits(**kw: int) -> EngineLimits:
    base = {
        "max_num_seqs": ROOMY.max_num_seqs,
        "max_num_batched_tokens": ROOMY.max_num_batched_tokens,
        "kv_capacity_tokens": ROOMY.kv_capacity_tokens,
        "max_model_len": ROOMY.max_model_len,
        "block_size_tokens": ROOMY.block_size_tokens,
    }
    return EngineLimits(**{**base, **kw})


def rank(pairs: list[tuple[int, float]]) -> int:
    n = np.array([p[0] for p in pairs], dtype=float)
    x = np.array([p[1] for p in pairs], dtype=float)
    design = np.column_stack([n * x, n, x, np.ones(len(pairs))])
    return int(np.linalg.matrix_rank(design / np.abs(design).max(axis=0)))


@pytest.mark.parametrize(
    ("lim", "prefill_points", "decode_points"),
    [
        (ROOMY, 25, 20),  # the whole QUICK grid: 5 N x 5 L, 5 N x 4 contexts
        (limits(max_num_seqs=4), 15, 12),  # N in 1, 2, 4
        (limits(max_num_batched_tokens=1024), 16, 11),  # N·L <= 1024
        (limits(max_model_len=300), 15, 10),  # L + 1 <= 300; context + 9 <= 300
        # 1024 blocks of 16: 16 seqs x 1025 (or 1033) tokens, 65 blocks each, do not fit
        (limits(kv_capacity_tokens=1024 * 16), 24, 19),
        # vLLM CPU-like: 128-token blocks, 64 MiB of tiny-model KV, budget 16384
        (limits(max_num_seqs=16, max_num_batched_tokens=16384, kv_capacity_tokens=65536,
                max_model_len=2048, block_size_tokens=128), 25, 20),
    ],
)  # fmt: skip
def test_plan_respects_limits_and_is_identifiable(
    lim: EngineLimits, prefill_points: int, decode_points: int
) -> None:
    plan = plan_sweep(lim, QUICK)
    assert len(plan.prefill) == prefill_points
    assert len(plan.decode) == decode_points
    for p in plan.prefill:
        assert prefill_fits(lim, p.n, p.length)
        assert p.n <= lim.max_num_seqs and p.n * p.length <= lim.max_num_batched_tokens
        assert p.length + 1 <= lim.max_model_len
    for d in plan.decode:
        assert decode_fits(lim, d.n, d.context, d.steps)
        assert d.context + d.steps + 1 <= lim.max_model_len
    assert rank([(p.n, p.length) for p in plan.prefill]) == 4
    assert rank([(d.n, d.mean_context) for d in plan.decode]) == 4
    # every point runs its repeats, in a shuffled order
    assert len(plan.runs) == 3 * len(plan.prefill) + 2 * len(plan.decode)
    assert len(plan.mixed) == QUICK.mixed_requests
    for r in plan.mixed:
        assert r.input_tokens + r.output_tokens <= lim.max_model_len


def test_runs_are_shuffled_but_seeded() -> None:
    a, b = plan_sweep(ROOMY, QUICK), plan_sweep(ROOMY, QUICK)
    assert a.runs == b.runs
    kinds = [k for k, _ in a.runs[: len(a.prefill) + len(a.decode)]]
    assert "decode" in kinds[: len(kinds) // 2]  # interleaved, not all prefill first
    other = plan_sweep(ROOMY, QUICK.model_copy(update={"seed": 1}))
    assert other.runs != a.runs


@pytest.mark.parametrize(
    ("lim", "settings", "kind", "needle"),
    [
        (limits(max_num_seqs=1), QUICK, "prefill", "max_num_seqs=1"),
        (limits(max_num_batched_tokens=16), QUICK, "prefill", "max_num_batched_tokens=16"),
        # 3 corners of a rectangle: 2 N x 2 L but one point over the budget -> rank 3
        (
            limits(max_num_batched_tokens=32),
            QUICK.model_copy(update={"batch_sizes": (1, 2), "prefill_lengths_tokens": (16, 32)}),
            "prefill",
            "rank 4",
        ),
        (limits(max_model_len=70), QUICK, "decode", "max_model_len=70"),
    ],
)
def test_unidentifiable_plan_names_the_limit(
    lim: EngineLimits, settings: SweepSettings, kind: str, needle: str
) -> None:
    with pytest.raises(ValueError, match=kind) as err:
        plan_sweep(lim, settings)
    assert needle in str(err.value)


@pytest.mark.parametrize("field", ["max_num_seqs", "kv_capacity_tokens", "block_size_tokens"])
def test_limits_must_be_positive(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        limits(**{field: 0})


def test_required_batched_tokens_covers_the_largest_point() -> None:
    assert required_batched_tokens(QUICK, 16, 2048) == 16 * 1024
    assert required_batched_tokens(QUICK, 4, 2048) == 4 * 1024
    assert required_batched_tokens(FULL, 32, 2048) == 32 * 1024  # lengths < max_model_len
    plan = plan_sweep(limits(max_num_batched_tokens=required_batched_tokens(QUICK, 256, 1 << 16)))
    assert len(plan.prefill) == 25


def test_settings_reject_unknown_fields() -> None:
    with pytest.raises(ValueError, match="repeats"):
        SweepSettings.model_validate({**QUICK.model_dump(), "repeats": 3})
