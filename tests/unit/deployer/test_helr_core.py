"""HELR's DP (UELLM Algorithm 2) against brute force, HE/LR, worked example."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from services.deployer.core.helr import (
    HELRProblem,
    Infeasible,
    Route,
    objective,
    route_latency_s,
    solve,
    split_layers,
)
from services.deployer.core.helr_bruteforce import all_routes, best_routes
from services.deployer.core.helr_classes import interchangeable_classes, max_route_gpus

GB = 10**9
HE, LR = (0.0, 1.0), (10.0, 1.0)


def problem(
    memory_gb: list[float],
    speed: list[float],
    lat: np.ndarray,
    layers: int,
    weight_gb: float,
    t_gb: float,
    weights: tuple[float, float] = LR,
) -> HELRProblem:
    return HELRProblem(
        np.array([round(m * GB) for m in memory_gb], dtype=np.int64),
        np.array(speed, dtype=np.float64),
        lat,
        layers,
        round(weight_gb * GB),
        round(t_gb * GB),
        1.0,
        *weights,
    )


def random_problem(rng: np.random.Generator, n: int, weights: tuple[float, float]) -> HELRProblem:
    """Mixed memories/speeds; node-structured latencies (so interchangeable GPUs occur) or a
    fully random asymmetric matrix."""
    memory = rng.choice([16.0, 24.0, 40.0, 80.0], size=n) + rng.choice([0.0, 1.5], size=n)
    speed = rng.choice([0.6e12, 1.5e12, 2.0e12, 3.3e12], size=n)
    if rng.random() < 0.5:
        node = rng.integers(0, 2, size=n)
        lat = np.where(node[:, None] == node[None, :], 1e-5, 1e-4)
    else:
        lat = rng.uniform(5e-6, 3e-4, size=(n, n))
    np.fill_diagonal(lat, 0.0)
    layers = int(rng.integers(4, 81))
    t = float(rng.choice([2.0, 4.0, 8.0]))
    usable = float(np.clip(memory - t, 0, None).sum())
    weight = float(rng.uniform(0.05, 1.05)) * max(usable, 1.0)
    return problem(list(memory), list(speed), lat, layers, weight, t, weights)


def check_against_bruteforce(prob: HELRProblem) -> Route | None:
    got = solve(prob)
    expected = best_routes(prob)
    if not expected:
        assert isinstance(got, Infeasible)
        return None
    assert isinstance(got, Route), got
    best = expected[0]
    assert math.isclose(got.objective, best.objective, rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(got.latency_s, best.latency_s, rel_tol=1e-9)
    # the reported figures are those of the map itself
    assert got.layers == split_layers([int(prob.capacities()[g]) for g in got.order], prob.layers)
    assert math.isclose(got.latency_s, route_latency_s(prob, got.order, got.layers), rel_tol=1e-9)
    assert got.objective == pytest.approx(objective(prob, got.latency_s, len(got.order)))
    if len(expected) == 1:  # unique optimum: the same map
        assert (got.order, got.layers) == (best.order, best.layers)
    return got


@pytest.mark.parametrize("seed", range(200))
def test_dp_equals_bruteforce_on_random_inventories(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 7))
    base = random_problem(rng, n, LR)
    he = check_against_bruteforce(replace(base, a1=HE[0], a2=HE[1]))
    lr = check_against_bruteforce(base)
    assert (he is None) == (lr is None)
    if he is not None and lr is not None:
        fewest = min(len(r.order) for r in all_routes(base))
        assert len(he.order) == fewest  # HE: fewest GPUs
        assert lr.latency_s <= he.latency_s * (1 + 1e-9)  # LR: never slower than HE
        assert sum(lr.layers) == sum(he.layers) == base.layers


@pytest.mark.parametrize("seed", range(40))
def test_interchangeable_reduction_is_exact_with_duplicate_gpus(seed: int) -> None:
    """7 GPUs from 2 types on 2 nodes: many duplicates, which the DP drops beyond k_max."""
    rng = np.random.default_rng(1000 + seed)
    kinds = rng.integers(0, 2, size=7)
    node = rng.integers(0, 2, size=7)
    memory = [(24.0, 80.0)[k] for k in kinds]
    speed = [(0.6e12, 2.0e12)[k] for k in kinds]
    lat = np.where(node[:, None] == node[None, :], 1e-5, 1e-4)
    np.fill_diagonal(lat, 0.0)
    weights = HE if seed % 2 else LR
    weight = float(rng.uniform(10.0, 200.0))
    check_against_bruteforce(problem(memory, speed, lat, 80, weight, 4.0, weights))


LAT3 = np.array([[0.0, 1e-4, 1e-3], [1e-4, 0.0, 2e-4], [1e-3, 2e-4, 0.0]])


@pytest.mark.parametrize(
    ("weights", "order", "layers", "latency_ms"),
    [
        # HE: one GPU suffices (g2 holds all 10 layers) although it is the slowest: 10 x 2 ms
        pytest.param(HE, (2,), (10,), 20.0, id="HE-fewest-gpus"),
        # LR: g1 first (fast, 4 layers x 0.5 ms), then g0 takes the other 6 (x 1 ms), hop 0.1 ms.
        # g0 first would be 7 x 1 + 3 x 0.5 + 0.1 = 8.6 ms; g0/g1 with g2 cost >= 14 ms.
        pytest.param(LR, (1, 0), (4, 6), 8.1, id="LR-lowest-latency"),
    ],
)
def test_worked_three_gpu_example(
    weights: tuple[float, float], order: tuple[int, ...], layers: tuple[int, ...], latency_ms: float
) -> None:
    """m = 10 GB / 10 layers = 1 GB, T = 2 GB: caps floor((9, 6, 12) − 2) = 7, 4, 10 layers;
    1, 0.5 and 2 ms per layer at 1, 2 and 0.5 TB/s."""
    prob = problem([9.0, 6.0, 12.0], [1e12, 2e12, 0.5e12], LAT3, 10, 10.0, 2.0, weights)
    assert list(prob.capacities()) == [7, 4, 10]
    route = solve(prob)
    assert isinstance(route, Route)
    assert (route.order, route.layers) == (order, layers)
    assert route.ranges == tuple(zip(np.cumsum((0, *layers))[:-1], np.cumsum(layers), strict=True))
    assert route.latency_s * 1e3 == pytest.approx(latency_ms)
    expected = weights[0] * latency_ms + weights[1] * len(order)
    assert route.objective == pytest.approx(expected)


@pytest.mark.parametrize(
    ("memory_gb", "t_gb", "rule", "text"),
    [
        ([], 2.0, "free-gpus", "no free GPUs"),
        ([2.8, 2.5], 2.0, "layer-fits", "no free GPU holds one layer"),
        ([6.0, 5.0], 2.0, "memory", "hold 7 of 10 layers"),
        ([12.0, 12.0], 11.5, "layer-fits", "T = 11.50 GB"),
    ],
)
def test_infeasible_names_the_rule(
    memory_gb: list[float], t_gb: float, rule: str, text: str
) -> None:
    n = len(memory_gb)
    lat = np.zeros((n, n))
    got = solve(problem(memory_gb, [1e12] * n, lat, 10, 10.0, t_gb))
    assert isinstance(got, Infeasible)
    assert got.rule == rule and text in str(got)
    assert str(got).startswith(f"{rule} rule: ")


def test_dp_size_limit_is_a_rule() -> None:
    lat = np.full((3, 3), 1e-4)
    np.fill_diagonal(lat, 0.0)
    prob = problem([9.0, 6.0, 12.0], [1e12, 2e12, 0.5e12], lat, 20, 20.0, 2.0)
    got = solve(prob, max_dp_gpus=2)
    assert isinstance(got, Infeasible) and got.rule == "dp-size"


@pytest.mark.parametrize(
    ("caps", "layers", "split"),
    [
        ([7, 4], 10, (7, 3)),
        ([4, 7], 10, (4, 6)),
        ([10, 3], 10, None),  # the second GPU would get no layer
        ([3, 3], 10, None),  # layers left over
        ([5, 5], 10, (5, 5)),
    ],
)
def test_split_layers_is_greedy(
    caps: list[int], layers: int, split: tuple[int, ...] | None
) -> None:
    assert split_layers(caps, layers) == split


def test_classes_and_route_length_bound() -> None:
    lat = np.full((4, 4), 1e-5)
    lat[3, :] = lat[:, 3] = 1e-4  # GPU 3 sits on another node
    np.fill_diagonal(lat, 0.0)
    cap = np.array([5, 5, 5, 5], dtype=np.int64)
    speed = np.ones(4)
    assert interchangeable_classes(cap, speed, lat) == [[0, 1, 2], [3]]
    assert max_route_gpus(cap, 11) == 3  # two GPUs hold 10 < 11
    assert max_route_gpus(cap, 10) == 2


def test_identical_gpus_read_in_index_order() -> None:
    lat = np.full((4, 4), 1e-5)
    np.fill_diagonal(lat, 0.0)
    route = solve(problem([80.0] * 4, [2e12] * 4, lat, 80, 138.0, 8.0))
    assert isinstance(route, Route)
    assert route.order == (0, 1) and route.layers == (41, 39)
