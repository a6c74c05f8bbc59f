"""Exact state reduction for HELR's DP (UELLM Algorithm 2; deployer README): drop surplus
copies of interchangeable GPUs before the O(2^n·n^2) subset DP.

GPUs a and b are interchangeable when they have the same layer capacity and speed, the same
latency to and from every other GPU, and (within a class) one common latency between members.
Swapping two members of a class in any route then leaves its layer split and cost unchanged.

A route never uses more than `k_max` GPUs, the largest k for which the k−1 smallest capacities
still sum to fewer than the model's layers (every GPU but the last of a route is filled to
capacity and the route ends as soon as the layers are placed). So at most k_max members of a
class can appear in one route, and keeping the first k_max of each class (lowest indices) keeps an
optimal route: replace the members a route uses by the kept ones, in order. The DP over the kept
GPUs is therefore exact; tests check it against brute force on the full set.

Typical effect: 4 nodes x 8 identical GPUs with a model needing 2 GPUs leave 4 x 2 = 8 GPUs.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def max_route_gpus(cap: NDArray[np.int64], layers: int) -> int:
    """k_max: most GPUs a route can use (all capacities must be >= 1)."""
    prefix = np.cumsum(np.sort(cap))
    return min(len(cap), 1 + int(np.count_nonzero(prefix < layers)))


def _same_class(
    i: int,
    members: list[int],
    cap: NDArray[np.int64],
    speed: NDArray[np.float64],
    lat: NDArray[np.float64],
) -> bool:
    r = members[0]
    if cap[i] != cap[r] or speed[i] != speed[r]:
        return False
    inside = [*members, i]
    others = np.ones(len(cap), dtype=bool)
    others[inside] = False
    if not (
        np.array_equal(lat[i, others], lat[r, others])
        and np.array_equal(lat[others, i], lat[others, r])
    ):
        return False
    within = {float(lat[a, b]) for a in inside for b in inside if a != b}
    return len(within) <= 1


def interchangeable_classes(
    cap: NDArray[np.int64], speed: NDArray[np.float64], lat: NDArray[np.float64]
) -> list[list[int]]:
    """GPUs grouped into classes of interchangeable ones (module docstring), in index order."""
    classes: list[list[int]] = []
    for i in range(len(cap)):
        for members in classes:
            if _same_class(i, members, cap, speed, lat):
                members.append(i)
                break
        else:
            classes.append([i])
    return classes


def reduce_interchangeable(
    cap: NDArray[np.int64], speed: NDArray[np.float64], lat: NDArray[np.float64], layers: int
) -> tuple[NDArray[np.int64], list[list[int]]]:
    """Indices of the GPUs the DP needs (sorted: the first k_max of every class) and the
    classes."""
    k_max = max_route_gpus(cap, layers)
    classes = interchangeable_classes(cap, speed, lat)
    keep = [i for members in classes for i in members[:k_max]]
    return np.array(sorted(keep), dtype=np.int64), classes


def canonical_order(order: list[int], classes: list[list[int]]) -> list[int]:
    """The same route with each class's GPUs relabelled lowest index first in route order
    (an equal-cost route; makes maps read 0, 1, 2 rather than 1, 0, 2)."""
    out = list(order)
    for members in classes:
        pos = [k for k, g in enumerate(order) if g in members]
        for k, g in zip(pos, members, strict=False):
            out[k] = g
    return out
