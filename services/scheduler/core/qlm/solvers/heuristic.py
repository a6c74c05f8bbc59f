"""Heuristic global scheduler: EDF within model batches, least-loaded virtual queue.

The ILP's warm start and fallback (services/scheduler/README.md, "Global scheduler"). Two
passes, O(G·Q + G log G):

1. Placement: groups in deadline order (EDF), each onto the eligible queue where it would
   *finish* earliest, counting the transition (drain_s + swap_s[model]) when its model differs
   from the last model placed on that queue (the queue's active_model while it is empty).
2. Order per queue: model batches (a batch per model, EDF inside), batches ordered by their
   earliest deadline. Two alternatives are scored with the queue's own objective and kept only
   when they do not hurt: the active_model's batch first (saves one swap), and the plain EDF
   order of pass 1 (when batching would push an urgent group of another model too late).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from services.scheduler.core.qlm.solvers.problem import (
    TIE_BREAK,
    GroupJob,
    Plan,
    QueueSlot,
    check_problem,
    scored_plan,
)


def edf_key(g: GroupJob) -> tuple[float, int, str]:
    """Earliest deadline first; larger groups first on a tie; id for determinism."""
    return (g.deadline_s, -g.size, g.group_id)


def heuristic_plan(groups: Sequence[GroupJob], queues: Sequence[QueueSlot]) -> Plan:
    """EDF within model batches on the least-loaded eligible queue; status "heuristic"."""
    t0 = time.perf_counter()
    check_problem(groups, queues)
    placed = _place(sorted(groups, key=edf_key), queues)
    order = {q.name: [g.group_id for g in _order_queue(q, placed[q.name])] for q in queues}
    plan = scored_plan(order, groups, queues, "heuristic")
    return _with_time(plan, time.perf_counter() - t0)


def _with_time(plan: Plan, solve_s: float) -> Plan:
    return Plan(plan.order, plan.objective, plan.violating, plan.status, solve_s)


def _place(edf: Sequence[GroupJob], queues: Sequence[QueueSlot]) -> dict[str, list[GroupJob]]:
    """Pass 1: each group (in EDF order) onto the queue where it would finish earliest."""
    index = {q.name: k for k, q in enumerate(queues)}
    ends = [q.ready_s for q in queues]
    last = [q.active_model for q in queues]
    switch: list[dict[str, float]] = [{} for _ in queues]  # per queue: model -> drain + swap
    out: list[list[GroupJob]] = [[] for _ in queues]
    for g in edf:
        best_k, best_f = -1, float("inf")
        for qname, service in g.service_s.items():
            k = index.get(qname, -1)
            if k < 0:
                continue
            f = ends[k] + service
            if g.model != last[k]:
                cost = switch[k].get(g.model)
                if cost is None:
                    q = queues[k]
                    cost = switch[k][g.model] = q.drain_s + q.swap_s.get(g.model, 0.0)
                f += cost
            if f < best_f or (f == best_f and k < best_k):
                best_k, best_f = k, f
        ends[best_k] = best_f
        last[best_k] = g.model
        out[best_k].append(g)
    return {q.name: out[k] for k, q in enumerate(queues)}


def _order_queue(q: QueueSlot, edf: list[GroupJob]) -> list[GroupJob]:
    """Pass 2: model batches by earliest deadline, or an alternative that does no worse."""
    first_seen: dict[str, int] = {}
    for g in edf:  # batches by their earliest deadline = by first appearance in EDF order
        first_seen.setdefault(g.model, len(first_seen))
    if len(first_seen) < 2:
        return edf
    rank = np.array([first_seen[g.model] for g in edf])
    batched = np.argsort(rank, kind="stable")  # EDF inside each batch
    candidates = []
    act = first_seen.get(q.active_model) if q.active_model is not None else None
    if act is not None and act != 0:
        candidates.append(np.argsort(np.where(rank == act, -1, rank), kind="stable"))
    candidates.append(batched)
    if np.any(np.diff(rank) < 0):  # models interleave in EDF order: EDF itself is a candidate
        candidates.append(np.arange(len(edf)))
    if len(candidates) > 1:
        costs = _costs(q, edf, candidates)
        batched = candidates[int(np.argmin(costs))]  # first of the minima wins
    return [edf[i] for i in batched]


def _costs(q: QueueSlot, seq: Sequence[GroupJob], perms: list[np.ndarray]) -> list[float]:
    """The objective of `evaluate` restricted to queue q, for each permutation of `seq`."""
    models = [g.model for g in seq]
    service = np.array([g.service_s[q.name] for g in seq])
    size = np.array([float(g.size) for g in seq])
    dead = np.array([g.deadline_s for g in seq])
    switch = np.array([q.drain_s + q.swap_s.get(m, 0.0) for m in models])
    ids: dict[str, int] = {}
    code = np.array([ids.setdefault(m, len(ids)) for m in models])
    out = []
    for p in perms:
        c = code[p]
        changed = np.concatenate([[models[p[0]] != q.active_model], c[1:] != c[:-1]])
        done = np.concatenate([[0.0], np.cumsum(service[p])[:-1]])
        wait = q.ready_s + done + np.cumsum(np.where(changed, switch[p], 0.0))
        out.append(float(np.sum(size[p] * (np.maximum(wait - dead[p], 0.0) + TIE_BREAK * wait))))
    return out
