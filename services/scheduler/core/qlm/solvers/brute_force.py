"""Exhaustive search over every placement and order, for checking the other solvers in tests.

The objective is a sum over queues, so for each assignment of groups to queues the best order
of each queue is found independently (all permutations, memoized per queue and group subset).
Tiny instances only: at most 6 groups and 3 queues.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence

from services.scheduler.core.qlm.solvers.problem import (
    GroupJob,
    Plan,
    QueueSlot,
    check_problem,
    evaluate,
    scored_plan,
)

MAX_GROUPS = 6
MAX_QUEUES = 3


def brute_force_plan(groups: Sequence[GroupJob], queues: Sequence[QueueSlot]) -> Plan:
    """The optimal plan by enumeration (status "optimal"); ValueError on instances too large."""
    t0 = time.perf_counter()
    if len(groups) > MAX_GROUPS or len(queues) > MAX_QUEUES:
        raise ValueError(
            f"brute force is for <= {MAX_GROUPS} groups and <= {MAX_QUEUES} queues, "
            f"got {len(groups)} groups and {len(queues)} queues"
        )
    check_problem(groups, queues)
    best: dict[tuple[int, frozenset[int]], tuple[float, tuple[int, ...]]] = {}

    def queue_best(k: int, members: frozenset[int]) -> tuple[float, tuple[int, ...]]:
        key = (k, members)
        if key not in best:
            sub = [groups[i] for i in sorted(members)]
            q = queues[k]
            best[key] = min(
                (evaluate({q.name: [groups[i].group_id for i in perm]}, sub, [q])[1], perm)
                for perm in itertools.permutations(sorted(members))
            )
        return best[key]

    choices = [[k for k, q in enumerate(queues) if q.name in g.service_s] for g in groups]
    top: tuple[float, list[tuple[int, ...]]] | None = None
    for assign in itertools.product(*choices):
        total, perms = 0.0, []
        for k in range(len(queues)):
            cost, perm = queue_best(k, frozenset(i for i, a in enumerate(assign) if a == k))
            total += cost
            perms.append(perm)
        if top is None or total < top[0]:
            top = (total, perms)
    assert top is not None or not groups
    perms = top[1] if top is not None else [() for _ in queues]
    order = {q.name: [groups[i].group_id for i in perms[k]] for k, q in enumerate(queues)}
    return scored_plan(order, groups, queues, "optimal", time.perf_counter() - t0)
