"""QLM RWT estimator (Eqs. 1-5, 15-16): hand-checked values, queue walks, and a CLT check."""

from __future__ import annotations

import math

import numpy as np
import pytest

from services.scheduler.core.qlm.rwt import (
    GroupLoad,
    InstanceRates,
    RWTEstimator,
    z_for_percentile,
)
from services.scheduler.core.qlm.rwt_accuracy import RWTAccuracy
from services.scheduler.core.qlm.solvers.problem import GroupJob, QueueSlot, evaluate
from shared.domain.profile import DecodeCoeffs, HardwareProfile, PrefillCoeffs

Z99 = 2.326


def _profile(kv_tokens: int = 100_000, inefficiency: float = 1.5) -> HardwareProfile:
    return HardwareProfile(
        gpu="test-gpu",
        model="m",
        tensor_parallel=1,
        prefill=PrefillCoeffs(p1=1e-5, p2=2e-3, p3=0.0, p4=0.02),
        decode=DecodeCoeffs(d1=1e-7, d2=1e-3, d3=1e-6, d4=0.01),
        kv_capacity_bytes=kv_tokens * 1000,
        kv_bytes_per_token=1000,
        weight_bytes=10**9,
        swap_bytes_s=1e10,
        cold_load_bytes_s=1e9,
        inefficiency=inefficiency,
        source="test",
    )


def _rates(theta: float = 50.0, prefill: float = 0.5, d: float = 0.01) -> InstanceRates:
    return InstanceRates(theta_tok_s=theta, prefill_s=prefill, decode_token_s=d)


def _group(size: int, mu: float = 100.0, sigma: float = 20.0, model: str = "a") -> GroupLoad:
    return GroupLoad(size, mu, sigma, max_o=250, mean_input_tokens=300.0, model=model)


def test_theta_from_profile_by_hand() -> None:
    r = InstanceRates.from_profile(_profile(), mean_input_tokens=300, mean_output_tokens=200)
    # B = floor(100_000 / (300 + 200)) = 200 (< max_num_seqs 256); context = 300 + 200/2 = 400.
    d = 1e-7 * 200 * 400 + 1e-3 * 200 + 1e-6 * 400 + 0.01
    assert r.batch == 200
    assert r.decode_token_s == pytest.approx(d, rel=1e-12)
    # each iteration also prefills the B/E[O] = 1 request joining: p1·E[I] + p2
    step = d + (200 / 200) * (1e-5 * 300 + 2e-3)
    assert r.theta_tok_s == pytest.approx(200 / (step * 1.5), rel=1e-12)
    assert r.prefill_s == pytest.approx(1e-5 * 300 + 2e-3 + 0.02, rel=1e-12)
    assert r.inefficiency == 1.5
    # Eq. 4: D = O·ε·d.
    assert r.tail_s(100) == pytest.approx(r.prefill_s + 100 * 1.5 * d, rel=1e-12)


def test_batch_capped_by_max_num_seqs_and_at_least_one() -> None:
    capped = InstanceRates.from_profile(_profile(), 300, 200, max_num_seqs=64)
    assert capped.batch == 64
    d = 1e-7 * 64 * 400 + 1e-3 * 64 + 1e-6 * 400 + 0.01
    step = d + (64 / 200) * (1e-5 * 300 + 2e-3)
    assert capped.theta_tok_s == pytest.approx(64 / (step * 1.5), rel=1e-12)
    tiny = InstanceRates.from_profile(_profile(kv_tokens=100), 300, 200)
    assert tiny.batch == 1


def test_wait_on_a_known_queue() -> None:
    rates = _rates(theta=50.0)
    # 3 requests ahead, μ=100, σ=20 -> N(300, 3·400); Θ = 50 tok/s.
    assert RWTEstimator(0.0).request_wait_s(300, 3 * 400, rates) == pytest.approx(6.0)
    w = RWTEstimator(Z99).request_wait_s(300, 3 * 400, rates, ready_s=1.0)
    assert w == pytest.approx(1.0 + 6.0 + Z99 * math.sqrt(3) * 20 / 50)


def test_z_for_percentile() -> None:
    assert z_for_percentile(0.99) == pytest.approx(2.326, abs=1e-3)
    assert z_for_percentile(0.5) == pytest.approx(0.0, abs=1e-12)
    assert RWTEstimator.for_percentile(0.99).z == pytest.approx(2.326, abs=1e-3)
    for bad in (0.0, 1.0, 99.0):
        with pytest.raises(ValueError):
            z_for_percentile(bad)
    with pytest.raises(ValueError):
        RWTEstimator(-1.0)


def test_quantile_conservative_for_short_queues_tighter_for_long() -> None:
    rates, mean_est, q_est = _rates(), RWTEstimator(0.0), RWTEstimator(Z99)
    margins = []
    for ahead in (1, 4, 16, 64, 256, 1024):
        w0 = mean_est.request_wait_s(ahead * 100, ahead * 400, rates)
        wz = q_est.request_wait_s(ahead * 100, ahead * 400, rates)
        assert wz > w0
        margins.append((wz - w0) / w0)  # z·σ·sqrt(q) / (q·μ)
    assert margins == sorted(margins, reverse=True)
    assert margins[0] == pytest.approx(Z99 * 20 / 100)
    assert margins[-1] == pytest.approx(Z99 * 20 / (100 * 32))


def test_same_model_run_sums_tokens_ahead() -> None:
    est, rates = RWTEstimator(Z99), _rates()
    groups = [_group(10), _group(5, mu=200.0, sigma=50.0), _group(4)]
    out = est.queue_estimates(groups, {"a": rates}, 2.0, {"a": 9.0}, 7.0, "a")
    assert [e.transition for e in out] == [False, False, False]
    assert out[0].start_s == pytest.approx(2.0)
    mean, var = 10 * 100 + 5 * 200, 10 * 400 + 5 * 2500
    assert out[2].start_s == pytest.approx(2.0 + (mean + Z99 * math.sqrt(var)) / 50)
    assert out[1].service_s == pytest.approx((5 * 200 + Z99 * math.sqrt(5) * 50) / 50)
    # Completion of the last request: the group's own tokens included, plus P + D.
    last = (mean + 400 + Z99 * math.sqrt(var + 4 * 400)) / 50
    assert out[2].completion_s == pytest.approx(2.0 + last + 0.5 + 250 * 0.01)
    for e in out:
        assert e.completion_s >= e.start_s
        assert e.start_s >= 2.0


def test_model_transition_adds_drain_and_swap() -> None:
    est, ra, rb = RWTEstimator(0.0), _rates(theta=50.0), _rates(theta=100.0, prefill=1.0)
    rates = {"a": ra, "b": rb}
    swap = {"a": 4.0, "b": 6.0}
    out = est.queue_estimates(
        [_group(10, model="a"), _group(8, model="b")], rates, 1.0, swap, 3.0, "b"
    )
    # Head: active model b, group a -> ready + drain + swap[a].
    assert out[0].transition and out[0].start_s == pytest.approx(1.0 + 3.0 + 4.0)
    c0 = 8.0 + 10 * 100 / 50 + 0.5 + 250 * 0.01
    assert out[0].completion_s == pytest.approx(c0)
    # Next run waits for the previous run's completion (Eq. 5), then swaps b in.
    assert out[1].transition and out[1].start_s == pytest.approx(c0 + 6.0)
    assert out[1].completion_s == pytest.approx(c0 + 6.0 + 800 / 100 + 1.0 + 2.5)
    # Same queue without the transition: strictly earlier.
    same = est.queue_estimates([_group(10, model="a")], rates, 1.0, swap, 3.0, "a")
    assert same[0].start_s == pytest.approx(1.0)
    assert same[0].start_s < out[0].start_s


def test_run_waits_for_latest_completion_and_empty_groups() -> None:
    est, rates = RWTEstimator(0.0), {"a": _rates(), "b": _rates()}
    big_tail = GroupLoad(2, 100.0, 20.0, max_o=5000, mean_input_tokens=300.0, model="a")
    groups = [big_tail, _group(1), _group(0, model="b")]
    out = est.queue_estimates(groups, rates, 0.0, {}, 0.0, "a")
    # The first group's long tail (max_o 5000) finishes after the second group: C = max (Eq. 5).
    assert out[0].completion_s > out[1].completion_s
    assert out[2].start_s == pytest.approx(out[0].completion_s)
    assert out[2].completion_s == out[2].start_s and out[2].service_s == 0.0
    with pytest.raises(ValueError, match="no InstanceRates"):
        est.queue_estimates([_group(1, model="zz")], rates, 0.0, {}, 0.0, None)


@pytest.mark.parametrize("z", [0.0, Z99])
def test_consistent_with_solver_evaluate(z: float) -> None:
    # Equal tails (P + D = 0.5 + 250·0.01 = 3.0) for both models, so evaluate's one drain_s fits.
    est, rates = RWTEstimator(z), {"a": _rates(theta=50.0), "b": _rates(theta=100.0)}
    groups = [_group(10), _group(5, mu=300.0), _group(8, model="b"), _group(4), _group(6)]
    swap, drain = {"a": 4.0, "b": 6.0}, 3.0
    out = est.queue_estimates(groups, rates, 1.0, swap, drain, "b")
    assert {e.tail_s for e in out} == {drain}
    jobs = [
        GroupJob(f"g{i}", g.model, g.size, 1e9, {"q": e.service_s})
        for i, (g, e) in enumerate(zip(groups, out, strict=True))
    ]
    slot = QueueSlot("q", "b", ready_s=1.0, drain_s=drain, swap_s=swap)
    waits, _ = evaluate({"q": [j.group_id for j in jobs]}, jobs, [slot])
    for i, e in enumerate(out):
        if z == 0.0 or i < 2:  # at most one group ahead, no quantile of a sum yet
            assert waits[f"g{i}"] == pytest.approx(e.start_s, rel=1e-12)
        else:  # quantiles of sums are subadditive: evaluate's additive waits are conservative
            assert waits[f"g{i}"] > e.start_s


def test_request_waits_in_group() -> None:
    est, rates = RWTEstimator(Z99), _rates()
    g = _group(4)
    w = est.request_waits_in_group(g, 10.0, rates)
    assert len(w) == 4 and w[0] == 10.0
    assert w[2] == pytest.approx(10.0 + (200 + Z99 * math.sqrt(2) * 20) / 50)
    assert w == sorted(w)
    # With the run's tokens ahead, the quantile is of the whole sum (Eqs. 2-3 exactly).
    out = est.queue_estimates([_group(6, sigma=40.0), g], {"a": rates}, 0.0, {}, 0.0, "a")
    e = out[1]
    joint = est.request_waits_in_group(
        g,
        e.start_s,
        rates,
        ahead_mean_tokens=e.ahead_mean_tokens,
        ahead_var_tokens=e.ahead_var_tokens,
    )
    for k, wk in enumerate(joint):
        assert wk == pytest.approx(est.request_wait_s(600 + k * 100, 6 * 1600 + k * 400, rates))
    additive = est.request_waits_in_group(g, e.start_s, rates)
    assert joint[0] == additive[0] and all(
        j < a for j, a in zip(joint[1:], additive[1:], strict=True)
    )
    assert est.request_waits_in_group(_group(0), 3.0, rates) == []


def _lognormal(rng: np.random.Generator, mean: float, cv: float, n: int) -> np.ndarray:
    s2 = math.log1p(cv * cv)
    return rng.lognormal(math.log(mean) - s2 / 2, math.sqrt(s2), size=n)


def _serve(outputs: np.ndarray, theta: float, slots: int, rng: np.random.Generator) -> np.ndarray:
    """Start times of a FIFO queue served at Θ tokens/s in total.

    slots = 0: a fluid server (Eq. 2 exactly with the realized outputs). slots = B: B sequences
    decode at Θ/B tokens/s each, and a request starts when one finishes; the batch is warmed up
    with 8·B earlier requests so the queue under test meets a full, steady running batch.
    """
    if slots == 0:
        return np.concatenate([[0.0], np.cumsum(outputs)[:-1]]) / theta
    warm = 8 * slots
    seq = np.concatenate([_lognormal(rng, 200.0, 0.8, warm), outputs])
    free, starts = np.zeros(slots), np.empty(len(seq))
    for i, o in enumerate(seq):
        k = int(np.argmin(free))
        starts[i] = free[k]
        free[k] += o * slots / theta
    return starts[warm:] - starts[warm - 1]


@pytest.mark.parametrize("slots", [0, 16])
def test_simulated_waits_r2_with_four_groups_ahead(slots: int) -> None:
    rng = np.random.default_rng(20240611)
    rates = _rates(theta=500.0)
    est = RWTEstimator(0.0)  # the mean estimate is what R² scores
    acc = RWTAccuracy()
    for trial in range(100):
        groups, outs = [], []
        for _ in range(int(rng.integers(5, 17))):
            n, mu, cv = int(rng.integers(8, 33)), rng.uniform(60, 400), rng.uniform(0.5, 1.0)
            groups.append(GroupLoad(n, mu, mu * cv, int(20 * mu), 300.0, "m"))
            outs.append(_lognormal(rng, mu, cv, n))
        starts = _serve(np.concatenate(outs), 500.0, slots, rng)
        pos = 0
        for gi, (g, e) in enumerate(
            zip(groups, est.queue_estimates(groups, {"m": rates}, 0.0, {}, 0.0, "m"), strict=True)
        ):
            waits = est.request_waits_in_group(
                g,
                e.start_s,
                rates,
                ahead_mean_tokens=e.ahead_mean_tokens,
                ahead_var_tokens=e.ahead_var_tokens,
            )
            for w in waits:
                acc.predict(f"{trial}/{pos}", w, queue_size=pos, groups_queued=gi)
                acc.observe(f"{trial}/{pos}", float(starts[pos]))
                pos += 1
    (few_label, few_n, few_r2), (many_label, many_n, many_r2) = acc.r2_by([0, 4])
    assert (few_label, many_label) == ("0-3", "4+")
    assert few_n > 1000 and many_n > 5000
    assert many_r2 is not None and many_r2 >= 0.95
    assert few_r2 is not None and few_r2 < many_r2


def _predicted_waits(
    est: RWTEstimator, groups: list[GroupLoad], rates: InstanceRates
) -> np.ndarray:
    preds: list[float] = []
    for g, e in zip(
        groups, est.queue_estimates(groups, {"m": rates}, 0.0, {}, 0.0, "m"), strict=True
    ):
        preds += est.request_waits_in_group(
            g,
            e.start_s,
            rates,
            ahead_mean_tokens=e.ahead_mean_tokens,
            ahead_var_tokens=e.ahead_var_tokens,
        )
    return np.asarray(preds)


def test_quantile_covers_simulated_waits() -> None:
    # One queue composition, many independent realizations: at every position with >= 32
    # requests ahead the p99 estimate covers ~98-99% of the simulated (fluid) waits (the right
    # skew of lognormal sums makes the CLT normal undercover a little), the mean about half.
    rng = np.random.default_rng(7)
    rates = _rates(theta=500.0)
    params = [
        (16, 120.0, 0.9),
        (8, 300.0, 0.6),
        (24, 80.0, 1.0),
        (12, 200.0, 0.8),
        (16, 150.0, 0.7),
    ]
    groups = [GroupLoad(n, mu, mu * cv, int(20 * mu), 300.0, "m") for n, mu, cv in params]
    runs = [
        np.concatenate([_lognormal(rng, mu, cv, n) for n, mu, cv in params]) for _ in range(4000)
    ]
    sims = np.stack([_serve(o, 500.0, 0, rng) for o in runs])
    p99 = (sims <= _predicted_waits(RWTEstimator.for_percentile(0.99), groups, rates)).mean(axis=0)
    mean = (sims <= _predicted_waits(RWTEstimator(0.0), groups, rates)).mean(axis=0)
    assert p99[32:].min() >= 0.97 and p99[32:].mean() >= 0.975
    assert mean[32:].min() >= 0.4 and mean[32:].max() <= 0.65
