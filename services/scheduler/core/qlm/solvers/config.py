"""Typed configuration of the QLM global scheduler (services/scheduler/README.md, "QLM")."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class GlobalSchedulerConfig(BaseModel):
    """Which solver orders the virtual queues, and how long it may take."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    solver: Literal["ilp", "heuristic"] = "ilp"
    """"ilp": the ILP of QLM Eqs. 6-13 (cvxpy + HiGHS) over the most urgent groups, warm-started
    and backed by the heuristic; "heuristic": EDF within model batches on the least-loaded queue
    only."""
    time_limit_s: float = Field(0.1, gt=0)
    """Wall-clock budget of one ILP run (seconds), model building included; when it runs out the
    best plan found so far (or the heuristic's) is used."""
    mip_rel_gap: float = Field(0.02, ge=0, lt=1)
    """Relative MIP gap (fraction, 0.02 = 2%) at which HiGHS stops and reports "optimal"."""
    max_ilp_groups: int = Field(8, ge=1)
    """ILP window (groups): the most urgent groups by deadline go to the ILP; the rest are appended
    to each queue by the heuristic after the ILP's order. 8 keeps a solve (cvxpy compilation
    included) near 50 ms on 8 queues; at 64 compilation alone exceeds 100 ms (`slomesh
    bench-solver`)."""
