"""The global scheduler's problem (QLM Eqs. 6-13): place request groups on virtual queues, in order.

Inputs are plain numbers the RWT estimator already computed, so every solver (ILP, heuristic,
brute force) sees the same problem and `evaluate` scores any plan the same way:

    A virtual queue q starts free at `ready_s` with `active_model` loaded. Walking its order,
    a group whose model differs from the previous one (or from `active_model` for the head)
    pays a transition first: `drain_s` (the running batch completes) + `swap_s[model]`.
    The group's wait is the time at which it starts; it then occupies the queue for
    `service_s[q]` (its output tokens / token throughput Θ of that instance, Eq. 2).
    Penalty p = wait - deadline_s (Eq. 11). DECISION (services/scheduler/README.md): minimize
    Σ size·max(0, p) rather than require p <= 0, plus `TIE_BREAK`·Σ size·wait so that, among
    plans without violation, shorter waits (fewer swaps) win.

All times are seconds relative to "now".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

TIE_BREAK = 1e-3
"""Weight of Σ size·wait in the objective, next to Σ size·violation (weight 1)."""


@dataclass(frozen=True, slots=True)
class GroupJob:
    """One request group to place: its requests still queued, as the estimator sees them."""

    group_id: str
    model: str
    size: int
    """Queued requests in the group (the weight of its violation)."""
    deadline_s: float
    """Latest start (from now) that meets the group's TTFT SLO; may be negative (already late)."""
    service_s: Mapping[str, float]
    """Queue name -> time the group occupies that queue. Queues not listed cannot serve it."""


@dataclass(frozen=True, slots=True)
class QueueSlot:
    """One virtual queue, i.e. one serving instance."""

    name: str
    active_model: str | None
    ready_s: float = 0.0
    """When the instance can start queued work (its in-service backlog drains enough)."""
    drain_s: float = 0.0
    """Time for the running batch to complete before a model swap."""
    swap_s: Mapping[str, float] = field(default_factory=dict)
    """Model -> time to make it GPU-active on this instance (tier-dependent load time)."""


SolveStatus = Literal["optimal", "feasible", "heuristic", "fallback"]


@dataclass(frozen=True, slots=True)
class Plan:
    """Group order per virtual queue, head first; every group appears exactly once."""

    order: Mapping[str, Sequence[str]]
    objective: float
    """Σ size·max(0, wait - deadline) + TIE_BREAK·Σ size·wait, per `evaluate`."""
    violating: tuple[str, ...]
    """Group ids predicted to miss their SLO under this plan."""
    status: SolveStatus
    """optimal / feasible (ILP, gap or time limit), heuristic (no ILP run), fallback (ILP
    failed or timed out without a better incumbent, heuristic plan used)."""
    solve_s: float = 0.0
    """Wall time the solver spent, measured by the solver with the injected timer."""


def evaluate(
    order: Mapping[str, Sequence[str]],
    groups: Sequence[GroupJob],
    queues: Sequence[QueueSlot],
) -> tuple[dict[str, float], float]:
    """Start wait of every group under `order`, and the objective. Raises on an invalid order."""
    by_id = {g.group_id: g for g in groups}
    qs = {q.name: q for q in queues}
    seen: set[str] = set()
    waits: dict[str, float] = {}
    for qname, ids in order.items():
        if qname not in qs:
            raise ValueError(f"plan.order names unknown queue '{qname}'")
        q = qs[qname]
        t, model = q.ready_s, q.active_model
        for gid in ids:
            g = by_id.get(gid)
            if g is None or gid in seen:
                raise ValueError(f"plan.order: group '{gid}' is unknown or placed twice")
            if qname not in g.service_s:
                raise ValueError(f"plan.order: queue '{qname}' cannot serve group '{gid}'")
            seen.add(gid)
            if g.model != model:
                t += q.drain_s + q.swap_s.get(g.model, 0.0)
                model = g.model
            waits[gid] = t
            t += g.service_s[qname]
    missing = set(by_id) - seen
    if missing:
        raise ValueError(f"plan.order leaves groups unplaced: {sorted(missing)}")
    obj = sum(
        g.size * (max(0.0, waits[g.group_id] - g.deadline_s) + TIE_BREAK * waits[g.group_id])
        for g in groups
    )
    return waits, obj


def check_problem(groups: Sequence[GroupJob], queues: Sequence[QueueSlot]) -> None:
    """Raise ValueError on duplicate ids or names, or on a group no listed queue can serve."""
    names = {q.name for q in queues}
    if len(names) != len(queues):
        raise ValueError("queues: duplicate queue names")
    seen: set[str] = set()
    for g in groups:
        if g.group_id in seen:
            raise ValueError(f"groups: duplicate group id '{g.group_id}'")
        seen.add(g.group_id)
        if names.isdisjoint(g.service_s):
            raise ValueError(
                f"group '{g.group_id}' (model '{g.model}') cannot be served by any queue; "
                f"its service_s names {sorted(g.service_s)}, queues are {sorted(names)}"
            )


def scored_plan(
    order: Mapping[str, Sequence[str]],
    groups: Sequence[GroupJob],
    queues: Sequence[QueueSlot],
    status: SolveStatus,
    solve_s: float = 0.0,
) -> Plan:
    """A Plan for `order` (every queue listed, possibly empty) scored by `evaluate`."""
    waits, obj = evaluate(order, groups, queues)
    full = {q.name: tuple(order.get(q.name, ())) for q in queues}
    late = tuple(g.group_id for g in groups if waits[g.group_id] > g.deadline_s)
    return Plan(order=full, objective=obj, violating=late, status=status, solve_s=solve_s)
