"""Typed configuration of the QLM global scheduler (services/scheduler/README.md, "QLM")."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class WorkLimits(BaseModel):
    """Deterministic limits on one HiGHS run, counted in solver work, never in time: a run
    stopped by them ends on the same plan on any machine at any load (HiGHS is deterministic
    for a given model and options)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    max_improving_solutions: int = Field(1, ge=1)
    """HiGHS stops at this many improving incumbents (`mip_max_improving_sols`); the first one
    already beats the heuristic's plan, which is the objective bound. 1: the first improving
    plan ends the run (its cost against the wall-clock budget: docs/results/design.md)."""
    max_nodes: int = Field(1, ge=1)
    """Branch-and-bound nodes HiGHS may open (`mip_max_nodes`); 1: the root node only, which
    bounds a run that finds no improving plan."""


class GlobalSchedulerConfig(BaseModel):
    """Which solver orders the virtual queues, and how long it may take."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    solver: Literal["ilp", "heuristic"] = "ilp"
    """"ilp": the ILP of QLM Eqs. 6-13 (HiGHS) over the most urgent groups, warm-started
    and backed by the heuristic; "heuristic": EDF within model batches on the least-loaded queue
    only."""
    budget: Literal["wall_clock", "work"] = "wall_clock"
    """What bounds one ILP run. "wall_clock" (live): `time_limit_s`, so the plan depends on the
    machine's speed and load; "work": `work_limits` only, no clock read to decide anything, so a
    simulated run is a pure function of its config and seed (the simulator sets this)."""
    time_limit_s: float = Field(0.1, gt=0)
    """Wall-clock budget of one ILP run (seconds), model building included; when it runs out the
    best plan found so far (or the heuristic's) is used. Ignored under budget "work"."""
    work_limits: WorkLimits = WorkLimits()
    """The deterministic limits of budget "work" (ignored under "wall_clock")."""
    mip_rel_gap: float = Field(0.02, ge=0, lt=1)
    """Relative MIP gap (fraction, 0.02 = 2%) at which HiGHS stops and reports "optimal"."""
    max_ilp_groups: int = Field(8, ge=1)
    """ILP window (groups): the most urgent groups by deadline go to the ILP; the rest are appended
    to each queue by the heuristic after the ILP's order. 8 keeps a solve (model building
    included) near 50 ms on 8 queues; at 64 a solve took about 100 ms (`slomesh bench-solver`)."""
