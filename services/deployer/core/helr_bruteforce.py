"""Brute-force reference for HELR (UELLM Algorithm 2), for tests only.

Enumerates every ordered subset of the GPUs (Σ_k n!/(n−k)! routes: 1,956 for 6 GPUs, 13,699 for
7), applies the same layer rule and cost as services.deployer.core.helr and ranks the valid routes
by (objective, latency). No DP, no reduction of interchangeable GPUs.
"""

from __future__ import annotations

from itertools import permutations

from services.deployer.core.helr import (
    TIE_RTOL,
    HELRProblem,
    Route,
    objective,
    route_latency_s,
    split_layers,
)


def all_routes(prob: HELRProblem) -> list[Route]:
    """Every valid route, best first (objective, then latency)."""
    cap = [int(c) for c in prob.capacities()]
    n = len(cap)
    routes: list[Route] = []
    for k in range(1, n + 1):
        for order in permutations(range(n), k):
            split = split_layers([cap[i] for i in order], prob.layers)
            if split is None:
                continue
            latency = route_latency_s(prob, order, split)
            routes.append(Route(order, split, latency, objective(prob, latency, k)))
    routes.sort(key=lambda r: (r.objective, r.latency_s))
    return routes


def best_routes(prob: HELRProblem) -> list[Route]:
    """The optimal routes by HELR's rule (objective within TIE_RTOL of the best, then lowest
    latency), all of them when several tie exactly; empty when no route exists."""
    routes = all_routes(prob)
    if not routes:
        return []
    best = routes[0].objective
    tied = [r for r in routes if r.objective <= best + TIE_RTOL * max(1.0, abs(best))]
    fastest = min(r.latency_s for r in tied)
    return [r for r in tied if r.latency_s <= fastest * (1 + 1e-12)]
