"""The global scheduler's ILP (QLM Eqs. 6-13) as a HiGHS model, built from sparse matrices.

Variables (an x only for eligible pairs): binary x[q,e,j] puts eligible group e of queue q at
position j < P_q (P_q <= groups eligible for q); u[q,m,j] in [0, 1] is 1 when position j switches
q to model m (Eq. 9 without big-M: u >= y[m,j] - y[m,j-1], where y[m,j] = Σ_{e of model m} x[q,e,j]
is the model indicator of Eq. 7, and y[m,-1] = [m = active_model]); w[q,j] is the start of
position j (Eq. 10, by recurrence):
    w[q,0] = ready_q + Σ_m c[q,m]·u[q,m,0],   w[q,j] = w[q,j-1] + Σ_e s[q,e]·x[q,e,j-1] + Σ_m c·u
with c[q,m] = drain_s + swap_s[m] and s the service times. Each group's wait
a_i >= w[q,j] - M(1 - x[q,i,j]) (Eq. 11, big-M) and its violation v_i >= a_i - deadline_i, v >= 0
(Eq. 12 relaxed, see the scheduler README). Objective Σ size·v + TIE_BREAK·Σ size·a,
equal to `evaluate` at every optimum (u, a and v sit on their lower bounds). Eq. 6: each group
exactly once, each position at most once, positions filled contiguously from the head.
Two valid cuts tighten the LP relaxation: a_i >= Σ lo·x and v_i >= Σ max(0, lo - d_i)·x, where lo
is the earliest start group i could have at (q, j).

HiGHS gets the continuous columns first, then the binaries, equality rows before inequality
rows, no stored zeros: the layout cvxpy handed it when the model went through cvxpy, so HiGHS
takes the same path and returns the same plans (HiGHS is sensitive to column order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp

from services.scheduler.core.qlm.solvers.problem import TIE_BREAK, GroupJob, QueueSlot

Array = np.ndarray


class _Rows:
    """COO triplets of one family of constraint rows, with their right-hand sides."""

    def __init__(self) -> None:
        self.r: list[Array] = []
        self.c: list[Array] = []
        self.v: list[Array] = []
        self.rhs: list[Array] = []
        self.n = 0

    def new_rows(self, rhs: Array) -> int:
        start = self.n
        self.rhs.append(np.asarray(rhs, dtype=float))
        self.n += len(rhs)
        return start

    def add(self, rows: Array, cols: Array, vals: Array | float) -> None:
        self.r.append(rows)
        self.c.append(cols)
        self.v.append(np.broadcast_to(np.asarray(vals, dtype=float), rows.shape))

    def matrix(self, ncols: int) -> tuple[sp.csr_matrix, Array]:
        a = sp.coo_matrix(
            (np.concatenate(self.v), (np.concatenate(self.r), np.concatenate(self.c))),
            shape=(self.n, ncols),
        )
        return a.tocsr(), np.concatenate(self.rhs)


@dataclass(frozen=True)
class IlpModel:
    """The HiGHS model and, per binary, the (queue index, group index, position) it decides."""

    model: highspy.HighsModel
    x_start: int
    """The first binary's column (the binaries are the last columns)."""
    x_queue: Array
    x_group: Array
    x_pos: Array


def build_model(
    groups: Sequence[GroupJob], queues: Sequence[QueueSlot], max_positions: int | None = None
) -> IlpModel:
    """Eqs. 6-13 over columns [x (binary) | w, u, a, v (continuous)], vectorized per queue."""
    n = len(groups)
    gidx = {g.group_id: i for i, g in enumerate(groups)}
    elig = [
        np.array([gidx[g.group_id] for g in groups if q.name in g.service_s], dtype=np.int64)
        for q in queues
    ]
    npos = [len(e) if max_positions is None else min(len(e), max_positions) for e in elig]
    nmod = [len({groups[i].model for i in e}) for e in elig]
    x_off = _offsets(0, [len(e) * p for e, p in zip(elig, npos, strict=True)])
    nx = int(x_off[-1])
    w_off = _offsets(nx, npos)
    u_off = _offsets(int(w_off[-1]), [m * p for m, p in zip(nmod, npos, strict=True)])
    a_off = int(u_off[-1])
    v_off = a_off + n
    gn = np.arange(n)
    dead = np.array([g.deadline_s for g in groups])
    min_wait = np.full(n, np.inf)  # no group starts before the earliest ready of its queues
    for q, e in zip(queues, elig, strict=True):
        min_wait[e] = np.minimum(min_wait[e], q.ready_s)
    eq, ineq = _Rows(), _Rows()
    eq.new_rows(np.ones(n))  # Eq. 6: every group exactly once
    a_rows = ineq.new_rows(np.zeros(n))  # cut: Σ lo·x[.,i,.] - a_i <= 0
    v_rows = ineq.new_rows(np.zeros(n))  # cut: Σ max(0, lo - d_i)·x[.,i,.] - v_i <= 0
    xq, xg, xj = [], [], []
    for k, (q, e, P) in enumerate(zip(queues, elig, npos, strict=True)):
        if P == 0:
            continue
        models = sorted({groups[i].model for i in e})
        mloc = np.array([models.index(groups[i].model) for i in e])
        cost = np.array([q.drain_s + q.swap_s.get(m, 0.0) for m in models])
        serv = np.array([groups[i].service_s[q.name] for i in e])
        ee, jj = np.divmod(np.arange(len(e) * P), P)  # x[k, e, j] at x_off[k] + e*P + j
        gi = e[ee]
        xcol = x_off[k] + ee * P + jj
        nxt = jj + 1 < P  # x at position j also appears in the rows of position j+1
        pos = np.arange(P)
        wcol = w_off[k] + pos
        um, uj = np.divmod(np.arange(len(models) * P), P)
        ucol = u_off[k] + um * P + uj  # u[k, m, j]
        xq.append(np.full(len(xcol), k))
        xg.append(gi)
        xj.append(jj)
        eq.add(gi, xcol, 1.0)
        # Eq. 10: start times by recurrence (one row per position).
        r0 = eq.new_rows(np.where(pos == 0, q.ready_s, 0.0))
        eq.add(r0 + pos, wcol, 1.0)
        eq.add(r0 + pos[1:], wcol[:-1], -1.0)
        eq.add(r0 + jj[nxt] + 1, xcol[nxt], -serv[ee[nxt]])
        eq.add(r0 + uj, ucol, -cost[um])
        # Eq. 6: each position at most once, filled contiguously from the head.
        r0 = ineq.new_rows(np.where(pos == 0, 1.0, 0.0))
        ineq.add(r0 + jj, xcol, 1.0)
        ineq.add(r0 + jj[nxt] + 1, xcol[nxt], -1.0)
        # Eqs. 7, 9: y[m,j] - y[m,j-1] - u[m,j] <= [j = 0 and m = active_model].
        act = models.index(q.active_model) if q.active_model in models else -1
        r0 = ineq.new_rows(((uj == 0) & (um == act)).astype(float))
        ineq.add(r0 + mloc[ee] * P + jj, xcol, 1.0)
        ineq.add(r0 + mloc[ee[nxt]] * P + jj[nxt] + 1, xcol[nxt], -1.0)
        ineq.add(r0 + um * P + uj, ucol, -1.0)
        # Start of position j: at least the j shortest services before it and no switch, at most
        # the j longest and a switch at every position. Group i adds its own switch to the low.
        ordered = np.sort(serv)
        w_lo = q.ready_s + np.concatenate([[0.0], np.cumsum(ordered)[: P - 1]])
        w_hi = q.ready_s + np.concatenate([[0.0], np.cumsum(ordered[::-1])[: P - 1]])
        w_hi = w_hi + (pos + 1) * cost.max()
        switch = np.where(np.array(models)[mloc] == q.active_model, 0.0, cost[mloc])
        lo = w_lo[jj] + switch[ee]
        # Eq. 11 linearized: w[k,j] - a_i + M·x[k,i,j] <= M.
        big = np.maximum(w_hi[jj] - min_wait[gi], 0.0)
        r0 = ineq.new_rows(big)
        ineq.add(r0 + np.arange(len(xcol)), wcol[jj], 1.0)
        ineq.add(r0 + np.arange(len(xcol)), a_off + gi, -1.0)
        ineq.add(r0 + np.arange(len(xcol)), xcol, big)
        ineq.add(a_rows + gi, xcol, lo)
        ineq.add(v_rows + gi, xcol, np.maximum(lo - dead[gi], 0.0))
    ineq.add(a_rows + gn, a_off + gn, -1.0)
    ineq.add(v_rows + gn, v_off + gn, -1.0)
    r0 = ineq.new_rows(dead)  # Eq. 12 relaxed: a_i - v_i <= deadline_i
    ineq.add(r0 + gn, a_off + gn, 1.0)
    ineq.add(r0 + gn, v_off + gn, -1.0)
    return _problem(eq, ineq, nx, int(w_off[-1]), a_off, groups, (xq, xg, xj))


def _offsets(start: int, counts: Sequence[int]) -> Array:
    return start + np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int64)


def _problem(
    eq: _Rows,
    ineq: _Rows,
    nx: int,
    u_start: int,
    a_off: int,
    groups: Sequence[GroupJob],
    xs: tuple[list[Array], list[Array], list[Array]],
) -> IlpModel:
    """One HiGHS model: columns [w, u, a, v | x], rows [equalities | inequalities]."""
    n = len(groups)
    ncol = a_off + 2 * n
    a_eq, b_eq = eq.matrix(ncol)
    a_in, b_in = ineq.matrix(ncol)
    perm = np.concatenate([np.arange(nx, ncol), np.arange(nx)])  # continuous first
    a = sp.vstack([a_eq, a_in]).tocsc()[:, perm]
    a.eliminate_zeros()
    a.sort_indices()
    ny = ncol - nx
    lb = np.concatenate([np.full(ny, -highspy.kHighsInf), np.zeros(nx)])
    ub = np.concatenate([np.full(ny, highspy.kHighsInf), np.ones(nx)])
    lb[u_start - nx : a_off - nx] = 0.0  # u in [0, 1]
    ub[u_start - nx : a_off - nx] = 1.0
    lb[a_off + n - nx : ny] = 0.0  # v >= 0
    size = np.array([float(g.size) for g in groups])
    model = highspy.HighsModel()
    lp = model.lp_
    lp.num_col_, lp.num_row_ = ncol, a.shape[0]
    lp.col_cost_ = np.concatenate([np.zeros(a_off - nx), TIE_BREAK * size, size, np.zeros(nx)])
    lp.col_lower_, lp.col_upper_ = lb, ub
    lp.row_lower_ = np.concatenate([b_eq, np.full(len(b_in), -highspy.kHighsInf)])
    lp.row_upper_ = np.concatenate([b_eq, b_in])
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = a.indptr
    lp.a_matrix_.index_ = a.indices
    lp.a_matrix_.value_ = a.data
    lp.integrality_ = [highspy.HighsVarType.kContinuous] * ny + [highspy.HighsVarType.kInteger] * nx
    xq, xg, xj = (np.concatenate(c) if c else np.zeros(0, np.int64) for c in xs)
    return IlpModel(model, ny, xq, xg, xj)


def decode(
    model: IlpModel,
    col_value: Sequence[float],
    groups: Sequence[GroupJob],
    queues: Sequence[QueueSlot],
) -> dict[str, list[str]] | None:
    """The order the binaries of a solution (`col_value`, every column) describe, or None when
    they do not place every group once."""
    val = np.asarray(col_value, dtype=float)[model.x_start :]
    if len(val) != len(model.x_queue) or not np.all(np.isfinite(val)):
        return None
    on = val > 0.5
    q, g, j = model.x_queue[on], model.x_group[on], model.x_pos[on]
    if len(g) != len(groups) or len(np.unique(g)) != len(groups):
        return None
    order: dict[str, list[str]] = {}
    for k, qs in enumerate(queues):
        sel = q == k
        order[qs.name] = [groups[i].group_id for i in g[sel][np.argsort(j[sel], kind="stable")]]
    return order
