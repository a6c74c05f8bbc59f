"""HELR, UELLM Algorithm 2 (services/deployer/README.md): choose GPUs, order and layer split.

Route model (per placed replica; a pipeline of stages, one GPU per stage):
    m           = weight_bytes / layers                 model bytes per layer
    cap(d)      = floor((Memory(d) − T) / m)            layers GPU d can hold, T = KV reserve
    layers[i]   = min(remaining, cap(order[i]))         greedy along the order
A route is valid when every GPU gets >= 1 layer and all layers are placed: every GPU but the last
is filled to capacity, the last takes the rest. (GPUs with cap 0 are never used.)
    latency_s   = Σ_i link_latency_s[order[i]][order[i+1]] + p · Σ_i layers[i]·m / speed(order[i])
    objective   = a1 · latency_ms + a2 · gpus_used      (latency_ms = 1000 · latency_s)
Latency is in milliseconds inside the objective so a1:a2 = 10:1 (LR) trades 0.1 ms of route
latency for one GPU; HE is a1 = 0, a2 = 1: fewest GPUs. Ties (objectives within 1e-9 relative)
go to the lower latency, so HE picks the fastest route among those with the fewest GPUs.

DP (the paper's dp[mark][i]): H[mask][k] = least link latency of a path visiting exactly the GPUs
in `mask` and ending at k, extended only from prefixes whose capacity is < layers (they must be
filled). Because every GPU but the last is full, the compute term of a path depends only on
(mask, last): p·m·(Σ_{i∈mask−k} cap_i/speed_i + rest/speed_k) with rest = layers − cap(mask−k).
A state is terminal ("subset holds the model") when cap(mask) >= layers; its objective adds
a2·|mask|, which depends on the mask only, so minimising link latency per (mask, last) is exact
for any a1, a2 >= 0. Subsets whose memory cannot hold the model are never terminal.

Performance: masks are processed by popcount, and for each (popcount, next GPU k) all masks are
relaxed at once with numpy (gather H[prev], add link[:, k], argmin over the last GPU), so the
2^n·n^2 transitions run as ~n^2 vectorised steps; prefixes that already hold the model are not
extended. Before the DP, surplus interchangeable GPUs are dropped (helr_classes: exact). 16
distinct GPUs plan in well under a second (`slomesh plan --bench`).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np
from numpy.typing import NDArray

from services.deployer.core.helr_classes import canonical_order, reduce_interchangeable

TIE_RTOL = 1e-9
"""Objectives within this relative distance of the best count as tied (then: lower latency)."""


@dataclass(frozen=True, slots=True, eq=False)
class HELRProblem:
    """One model to place on GPUs 0..n-1 (arrays in GPU order)."""

    memory_bytes: NDArray[np.int64]
    speed_bytes_s: NDArray[np.float64]
    link_latency_s: NDArray[np.float64]
    layers: int
    weight_bytes: int
    kv_reserve_bytes: int
    p: float = 1.0
    a1: float = 10.0
    a2: float = 1.0

    @property
    def layer_bytes(self) -> float:
        """m: weight bytes of one layer."""
        return self.weight_bytes / self.layers

    def capacities(self) -> NDArray[np.int64]:
        """cap(d) = floor((Memory(d) − T)·layers / weight_bytes), >= 0 (exact integers)."""
        free = np.maximum(np.asarray(self.memory_bytes, dtype=np.int64) - self.kv_reserve_bytes, 0)
        return np.asarray((free * self.layers) // self.weight_bytes, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class Route:
    """A device map: GPU indices in pipeline order and the layers of each, with its cost."""

    order: tuple[int, ...]
    layers: tuple[int, ...]
    latency_s: float
    objective: float

    @property
    def ranges(self) -> tuple[tuple[int, int], ...]:
        """Layer range [start, end) of every stage."""
        ends = np.cumsum(self.layers)
        return tuple((int(e - n), int(e)) for e, n in zip(ends, self.layers, strict=True))


@dataclass(frozen=True, slots=True)
class Infeasible:
    """Why no route exists: `rule` names the check that failed, `detail` explains it."""

    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.rule} rule: {self.detail}"


def split_layers(caps: list[int], layers: int) -> tuple[int, ...] | None:
    """layers[i] = min(remaining, cap_i) along an order; None unless every GPU gets >= 1 layer
    and all layers are placed."""
    out: list[int] = []
    remaining = layers
    for c in caps:
        take = min(remaining, c)
        if take < 1:
            return None
        out.append(take)
        remaining -= take
    return tuple(out) if remaining == 0 else None


def route_latency_s(prob: HELRProblem, order: tuple[int, ...], split: tuple[int, ...]) -> float:
    """Σ link latency between consecutive GPUs + p·Σ layers[i]·m / speed (seconds)."""
    link = sum(float(prob.link_latency_s[a, b]) for a, b in pairwise(order))
    m = prob.layer_bytes
    compute = sum(n * m / float(prob.speed_bytes_s[g]) for g, n in zip(order, split, strict=True))
    return link + prob.p * compute


def objective(prob: HELRProblem, latency_s: float, gpus: int) -> float:
    """a1 · latency_ms + a2 · gpus_used."""
    return prob.a1 * latency_s * 1e3 + prob.a2 * gpus


def _gb(x: float) -> str:
    return f"{x / 1e9:.2f} GB"


def check_feasible(prob: HELRProblem, cap: NDArray[np.int64]) -> Infeasible | None:
    """The first placement rule the GPUs fail as a whole, or None."""
    t, m = prob.kv_reserve_bytes, prob.layer_bytes
    if len(cap) == 0:
        return Infeasible("free-gpus", "no free GPUs left in the inventory")
    if int(cap.max()) < 1:
        biggest = int(np.max(prob.memory_bytes))
        return Infeasible(
            "layer-fits",
            f"no free GPU holds one layer: memory_bytes − T < m on all {len(cap)} "
            f"(largest {_gb(biggest)}, T = {_gb(t)}, m = {_gb(m)})",
        )
    if int(cap.sum()) < prob.layers:
        return Infeasible(
            "memory",
            f"the {len(cap)} free GPUs hold {int(cap.sum())} of {prob.layers} layers: "
            f"Σ floor((memory_bytes − T)/m) < layers (T = {_gb(t)}, m = {_gb(m)})",
        )
    return None


def solve(prob: HELRProblem, max_dp_gpus: int = 18) -> Route | Infeasible:
    """The route of least objective (module docstring), or why there is none."""
    cap_all = prob.capacities()
    bad = check_feasible(prob, cap_all)
    if bad is not None:
        return bad
    usable = np.flatnonzero(cap_all > 0)
    lat_all = np.asarray(prob.link_latency_s, dtype=np.float64)
    speed_all = np.asarray(prob.speed_bytes_s, dtype=np.float64)
    keep, classes = reduce_interchangeable(
        cap_all[usable], speed_all[usable], lat_all[np.ix_(usable, usable)], prob.layers
    )
    sub = usable[keep]
    if len(sub) > max_dp_gpus:
        return Infeasible(
            "dp-size",
            f"{len(sub)} distinct candidate GPUs exceed max_dp_gpus = {max_dp_gpus} "
            "(the exact DP is O(2^n·n^2)); plan per node group or raise max_dp_gpus",
        )
    order, split, latency = _dp(prob, cap_all[sub], speed_all[sub], lat_all[np.ix_(sub, sub)])
    in_usable = canonical_order([int(keep[i]) for i in order], classes)
    gpus = tuple(int(usable[i]) for i in in_usable)
    return Route(gpus, split, latency, objective(prob, latency, len(gpus)))


def _subset_sums(values: NDArray[np.float64], n: int) -> NDArray[np.float64]:
    """out[mask] = Σ values[i] over the bits i of mask (exact for integer-valued floats)."""
    out = np.zeros(1 << n, dtype=np.float64)
    for k in range(n):
        out[1 << k : 2 << k] = out[: 1 << k] + values[k]
    return out


def _dp(
    prob: HELRProblem, cap: NDArray[np.int64], speed: NDArray[np.float64], lat: NDArray[np.float64]
) -> tuple[tuple[int, ...], tuple[int, ...], float]:
    """Order (indices into cap), split and latency of the best route; one must exist."""
    n, layers = len(cap), prob.layers
    full = 1 << n
    capsum = _subset_sums(cap.astype(np.float64), n)  # layers < 2^53: exact
    comp = _subset_sums(cap / speed, n)  # Σ cap_i / speed_i over a mask
    pop = _subset_sums(np.ones(n), n)
    ext = capsum < layers  # a prefix that must be extended (it does not hold the model yet)
    masks = np.arange(full, dtype=np.int64)
    bits = np.int64(1) << np.arange(n, dtype=np.int64)
    link = np.full((full, n), np.inf)  # H[mask][last]
    parent = np.full((full, n), -1, dtype=np.int8)
    link[bits, np.arange(n)] = 0.0
    into = np.ascontiguousarray(lat.T)  # into[k][j]: latency of the hop j -> k
    by_pop = np.argsort(pop, kind="stable")
    starts = np.searchsorted(pop[by_pop], np.arange(n + 2))
    for c in range(2, n + 1):
        if not ext[by_pop[starts[c - 1] : starts[c]]].any():
            break  # every (c-1)-subset holds the model: no route is longer
        layer = by_pop[starts[c] : starts[c + 1]]
        for k in range(n):
            sel = layer[(layer & bits[k]) != 0]
            prev = sel ^ bits[k]
            keep = ext[prev]
            sel, prev = sel[keep], prev[keep]
            if sel.size == 0:
                continue
            cand = np.take(link, prev, axis=0)
            cand += into[k]
            j = cand.argmin(axis=1)
            link[sel, k] = np.take_along_axis(cand, j[:, None], axis=1)[:, 0]
            parent[sel, k] = j
    prevs = masks[:, None] ^ bits[None, :]
    ok = np.isfinite(link) & ext[prevs] & ~ext[:, None]
    rest = layers - capsum[prevs]
    m = prob.layer_bytes
    latency = np.where(ok, link + prob.p * m * (comp[prevs] + rest / speed[None, :]), np.inf)
    obj = np.full(latency.shape, np.inf)
    obj[ok] = prob.a1 * latency[ok] * 1e3 + prob.a2 * np.broadcast_to(pop[:, None], ok.shape)[ok]
    best = float(obj.min())
    tied = obj <= best + TIE_RTOL * max(1.0, abs(best))
    flat = int(np.argmin(np.where(tied, latency, np.inf)))
    mask, last = divmod(flat, n)
    order = [last]
    while parent[mask, last] >= 0:
        mask, last = mask ^ (1 << last), int(parent[mask, last])
        order.append(last)
    order.reverse()
    split = split_layers([int(cap[i]) for i in order], layers)
    assert split is not None  # the DP only reaches valid routes
    return tuple(order), split, float(latency.flat[flat])
