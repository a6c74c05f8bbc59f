"""SCLS DP batching (Algorithm 1): Fig. 11 example, optimality vs brute force, memory, slices."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np
import pytest

from services.scheduler.core.batching.base import FormedBatch, PoolItem
from services.scheduler.core.batching.estimator import BatchEstimator
from services.scheduler.core.batching.scls_dp import SCLSDPFormer
from shared.domain.profile import DecodeCoeffs, HardwareProfile, PrefillCoeffs
from shared.profiles import default_profile


def _profile(kv_tokens: int) -> HardwareProfile:
    return HardwareProfile(
        gpu="test-gpu",
        model="test-model",
        tensor_parallel=1,
        prefill=PrefillCoeffs(p1=1.1e-4, p2=7.0e-4, p3=3.0e-5, p4=1.2e-2),
        decode=DecodeCoeffs(d1=9.0e-8, d2=1.1e-4, d3=4.0e-6, d4=1.3e-2),
        kv_capacity_bytes=kv_tokens * 1000,
        kv_bytes_per_token=1000,
        weight_bytes=10**9,
        swap_bytes_s=25e9,
        cold_load_bytes_s=2e9,
        source="test",
    )


def _item(rid: str, ctx: int, out: int = 64, arrival: float = 0.0) -> PoolItem:
    return PoolItem(rid, ctx, out, slo_s=10.0, deadline_abs_s=arrival + 10.0, arrival_s=arrival)


def _sorted(pool: list[PoolItem]) -> list[PoolItem]:
    return sorted(pool, key=lambda r: (r.context_tokens, r.arrival_s, r.request_id))


def _partitions(n: int) -> Iterator[list[tuple[int, int]]]:
    """Every split of range(n) into contiguous [start, end) segments."""
    for cuts in itertools.product([False, True], repeat=n - 1):
        bounds = [0, *[k + 1 for k, cut in enumerate(cuts) if cut], n]
        yield list(itertools.pairwise(bounds))


def _brute_force(items: list[PoolItem], est: BatchEstimator, s: int | None) -> float:
    best = float("inf")
    for segs in _partitions(len(items)):
        total = 0.0
        for a, b in segs:
            seg = items[a:b]
            length = seg[-1].context_tokens
            iters = s if s is not None else max(r.predicted_output_tokens for r in seg)
            if len(seg) > 1 and not est.fits(len(seg), length, iters):
                break
            total += est.serve_time_s(len(seg), length, iters)
        else:
            best = min(best, total)
    return best


def _check_cover(pool: list[PoolItem], batches: list[FormedBatch]) -> None:
    flat = [r for b in batches for r in b.items]
    assert flat == _sorted(pool)  # each item exactly once, contiguous in sorted order
    lengths = [b.padded_len for b in batches]
    assert lengths == sorted(lengths)


def test_fig11_long_prompt_gets_its_own_batch() -> None:
    est = BatchEstimator(default_profile("A100-80GB", "llama-2-13b"))
    pool = [_item(f"s{i:02d}", 32, arrival=float(i)) for i in range(15)]
    pool.insert(7, _item("long", 1024, arrival=3.5))
    batches = SCLSDPFormer(slice_iterations=128).form(pool, est, now_s=0.0)
    assert [(b.size, b.padded_len, b.iterations) for b in batches] == [
        (15, 32, 128),
        (1, 1024, 128),
    ]
    assert batches[1].items[0].request_id == "long"
    together = est.serve_time_s(16, 1024, 128)
    separate = sum(b.est_time_s for b in batches)
    assert separate < together
    assert batches[0].est_time_s == pytest.approx(est.serve_time_s(15, 32, 128), rel=1e-12)


@pytest.mark.parametrize("case", range(20))
@pytest.mark.parametrize("slice_iterations", [128, 16, None])
def test_dp_is_optimal_against_brute_force(case: int, slice_iterations: int | None) -> None:
    rng = np.random.default_rng(1000 + case)
    n = int(rng.integers(1, 9))
    ctx = rng.integers(1, 600, size=n)
    outs = rng.integers(1, 300, size=n)
    pool = [_item(f"r{k}", int(ctx[k]), int(outs[k]), float(k)) for k in range(n)]
    # Memory from "a few long requests" to "plenty": some cases bind, some do not.
    est = BatchEstimator(_profile(int(rng.integers(800, 5000))), max_batch_size=6)
    batches = SCLSDPFormer(slice_iterations).form(pool, est, now_s=0.0)
    _check_cover(pool, batches)
    total = sum(b.est_time_s for b in batches)
    assert total == pytest.approx(_brute_force(_sorted(pool), est, slice_iterations), rel=1e-9)
    for b in batches:
        assert b.size == 1 or est.fits(b.size, b.padded_len, b.iterations)
        assert b.size <= 6


@pytest.mark.parametrize(
    ("kv_tokens", "cap", "n", "expected_max", "expected_batches"),
    [
        (10_000, 256, 10, 10, 1),  # everything fits: one batch
        (10_000, 4, 10, 4, 3),  # engine cap 4
        (3 * 200, 256, 10, 3, 4),  # memory: floor(600 / (72 + 128)) = 3 per batch
        (5 * 200, 256, 10, 5, 2),  # memory: floor(1000 / 200) = 5 per batch
    ],
)
def test_memory_and_size_caps_split_batches(
    kv_tokens: int, cap: int, n: int, expected_max: int, expected_batches: int
) -> None:
    est = BatchEstimator(_profile(kv_tokens), memory_fraction=1.0, max_batch_size=cap)
    pool = [_item(f"r{k}", 72, arrival=float(k)) for k in range(n)]
    batches = SCLSDPFormer(128).form(pool, est, now_s=0.0)
    _check_cover(pool, batches)
    assert max(b.size for b in batches) == expected_max
    assert len(batches) == expected_batches


def test_item_too_large_for_memory_still_gets_a_batch_of_one() -> None:
    est = BatchEstimator(_profile(2_000))
    pool = [_item("a", 50), _item("huge", 5_000), _item("b", 60)]
    batches = SCLSDPFormer(128).form(pool, est, now_s=0.0)
    _check_cover(pool, batches)
    assert batches[-1].items == (pool[1],)
    assert not est.fits(1, 5_000, 128)
    assert [r.request_id for r in batches[0].items] == ["a", "b"]


def test_slice_none_runs_to_longest_predicted_output() -> None:
    est = BatchEstimator(_profile(100_000))
    outs = [5, 300, 40, 7, 120]
    pool = [_item(f"r{k}", 100 + k, outs[k], float(k)) for k in range(5)]
    batches = SCLSDPFormer(slice_iterations=None).form(pool, est, now_s=0.0)
    _check_cover(pool, batches)
    for b in batches:
        longest = max(r.predicted_output_tokens for r in b.items)
        assert b.iterations == longest
        assert b.est_time_s == pytest.approx(est.serve_time_s(b.size, b.padded_len, longest))
    assert max(b.iterations for b in batches) == 300


def test_slice_none_keeps_long_outputs_apart_when_cheaper() -> None:
    # One request predicts 4000 tokens, the rest 8: sharing its batch would decode them all
    # 4000 steps, so the DP isolates it even though the lengths are nearly equal.
    est = BatchEstimator(_profile(1_000_000))
    pool = [_item(f"r{k}", 100, 8, float(k)) for k in range(6)]
    pool.append(_item("chatty", 101, 4000, 9.0))
    batches = SCLSDPFormer(slice_iterations=None).form(pool, est, now_s=0.0)
    assert [(b.size, b.iterations) for b in batches] == [(6, 8), (1, 4000)]


def test_fixed_slice_ignores_predicted_outputs() -> None:
    est = BatchEstimator(_profile(1_000_000))
    pool = [_item(f"r{k}", 100, 8 if k else 4000, float(k)) for k in range(6)]
    batches = SCLSDPFormer(slice_iterations=128).form(pool, est, now_s=0.0)
    assert [(b.size, b.iterations) for b in batches] == [(6, 128)]


def test_ties_sorted_by_arrival_then_id() -> None:
    est = BatchEstimator(_profile(1_000_000))
    pool = [_item("b", 10, arrival=2.0), _item("z", 10, arrival=1.0), _item("a", 10, arrival=2.0)]
    batches = SCLSDPFormer().form(pool, est, now_s=0.0)
    assert [r.request_id for b in batches for r in b.items] == ["z", "a", "b"]


def test_empty_pool_and_invalid_slice() -> None:
    est = BatchEstimator(_profile(1_000))
    assert SCLSDPFormer().form([], est, now_s=0.0) == []
    assert SCLSDPFormer.name == "scls-dp"
    with pytest.raises(ValueError, match="slice_iterations"):
        SCLSDPFormer(slice_iterations=0)


class _ScalarOnlyEstimator(BatchEstimator):
    """An estimator whose serve_time_s only takes Python ints, as a third-party one might."""

    __slots__ = ()

    def serve_time_s(self, n: int, padded_len: int, iterations: int) -> float:
        if not all(isinstance(v, int) for v in (n, padded_len, iterations)):
            raise TypeError("scalar ints only")
        return self.profile.serve_time_s(n, padded_len, iterations)


@pytest.mark.parametrize("slice_iterations", [32, None])
def test_scalar_only_estimator_gives_same_batches(slice_iterations: int | None) -> None:
    rng = np.random.default_rng(7)
    pool = [
        _item(f"r{k}", int(rng.integers(1, 900)), int(rng.integers(1, 200)), float(k))
        for k in range(40)
    ]
    vec = BatchEstimator(_profile(20_000), max_batch_size=12)
    scalar = _ScalarOnlyEstimator(_profile(20_000), max_batch_size=12)
    a = SCLSDPFormer(slice_iterations).form(pool, vec, now_s=0.0)
    b = SCLSDPFormer(slice_iterations).form(pool, scalar, now_s=0.0)
    assert [x.items for x in a] == [x.items for x in b]
    assert len(a) > 1
