"""Fairness between tenants: max-min fair shares (water-filling) and Jain's index.

Jain's index (Jain, Chiu, Hawe 1984) of allocations x_1..x_n is (Σx)² / (n·Σx²): 1 when all are
equal, 1/n when one tenant gets everything. Applied to raw service it punishes a tenant that
simply asked for less, so each tenant's service is first normalised by its max-min fair share
of what was served: the water-filling allocation of the capacity C = Σ served over the demands
d_i (every tenant gets min(d_i, L), with the level L such that Σ min(d_i, L) = C). A perfectly
max-min fair system has every x_i = served_i / share_i = 1.

What `tenant_service` counts (shared/metrics/summary.py uses it): demand is the tokens (input +
output) of the requests a tenant sent; service is the tokens served by the window's end
(a request's prompt once its first token is out, its output tokens pro rata of its decode
time elapsed). The window is the arrival period
(first to last arrival): the simulator runs until every request is answered, so over the whole
run every tenant is eventually served in full and only service while the load lasts can show
unfairness.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from shared.metrics.records import RequestRecord


def water_fill(demands: Mapping[str, float], capacity: float) -> dict[str, float]:
    """Max-min fair shares of `capacity` over `demands` (no one gets more than it asked)."""
    shares = {k: 0.0 for k in demands}
    left = max(capacity, 0.0)
    open_ = sorted((d, k) for k, d in demands.items() if d > 0)
    while open_ and left > 1e-12:
        level = left / len(open_)
        d, k = open_[0]
        if d <= level:  # the smallest demand is met in full; the rest share what remains
            shares[k] = d
            left -= d
            open_.pop(0)
        else:  # every remaining demand is above the level: all get the level
            for _, k2 in open_:
                shares[k2] = level
            left = 0.0
            open_ = []
    return shares


def jain(values: Sequence[float]) -> float:
    """Jain's index (Σx)² / (n·Σx²) of `values`; 1.0 for no values or all zeros."""
    n = len(values)
    sq = sum(v * v for v in values)
    if n == 0 or sq == 0:
        return 1.0
    return sum(values) ** 2 / (n * sq)


def jain_of_service(demands: Mapping[str, float], served: Mapping[str, float]) -> float:
    """Jain's index of each tenant's service normalised by its water-filling share of the total
    served. Tenants with no demand are left out; 1.0 with fewer than two tenants."""
    tenants = [k for k, d in demands.items() if d > 0]
    if len(tenants) < 2:
        return 1.0
    shares = water_fill({k: demands[k] for k in tenants}, sum(served.get(k, 0.0) for k in tenants))
    return jain([served.get(k, 0.0) / shares[k] if shares[k] > 0 else 1.0 for k in tenants])


def tenant_service(
    records: Sequence[RequestRecord],
) -> tuple[dict[str, float], dict[str, float]]:
    """(demand, service) in tokens per tenant over the arrival window (module docstring). A
    request that did not finish (rejected, shed) counts in its tenant's demand with its input
    tokens plus the mean output of that tenant's finished requests (its true output is not
    known to the record)."""
    if not records:
        return {}, {}
    end = max(r.arrival_s for r in records)
    outputs: dict[str, list[int]] = {}
    for r in records:
        if r.finished:
            outputs.setdefault(r.tenant, []).append(r.output_tokens)
    demand: dict[str, float] = {}
    served: dict[str, float] = {}
    for r in records:
        if r.finished:
            out = float(r.output_tokens)
        else:
            done = outputs.get(r.tenant, [])
            out = sum(done) / len(done) if done else 0.0
        demand[r.tenant] = demand.get(r.tenant, 0.0) + r.input_tokens + out
        served[r.tenant] = served.get(r.tenant, 0.0) + _served_by(r, end)
    return demand, served


def _served_by(r: RequestRecord, end_s: float) -> float:
    """Tokens of `r` served by `end_s`: its prompt once its first token is out, and its output
    tokens pro rata of the decode time elapsed (they come out at a near-constant pace)."""
    if not r.finished or r.first_token_s is None or r.finish_s is None or r.first_token_s > end_s:
        return 0.0
    if r.finish_s <= end_s or r.output_tokens <= 1:
        return float(r.input_tokens + r.output_tokens)
    frac = (end_s - r.first_token_s) / (r.finish_s - r.first_token_s)
    return r.input_tokens + 1 + frac * (r.output_tokens - 1)
