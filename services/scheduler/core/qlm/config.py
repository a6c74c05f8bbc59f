"""Typed configuration of the `qlm` global policy (one place for every knob, with units)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from services.scheduler.core.fairness.config import TenancyConfig
from services.scheduler.core.qlm.groups import GroupingConfig
from services.scheduler.core.qlm.rwt_error import RWTErrorConfig
from services.scheduler.core.qlm.solvers.config import GlobalSchedulerConfig
from services.scheduler.core.qlm.swap_plan import SwapPlanConfig
from services.scheduler.core.qlm.tight_classes import EvictionCostConfig, TightClassConfig


class LSOConfig(BaseModel):
    """Which LLM serving operations (QLM §5) are on; one off is an ablation (Figs. 11, 14)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    pull: bool = True
    """Instances pull from the head of their virtual queue when their engine has room. Off: each
    request is pushed into its instance's engine queue at arrival."""
    evict: bool = True
    """Running requests of looser SLO classes are evicted (KV kept on the host when cheaper than
    recompute) when a tighter group reaches the head and the engine has no room."""
    swap: bool = True
    """Model swapping by virtual queue: the planner batches groups of a model and counts swap
    costs, and the next models in the queue are kept warm in host memory. Off: swap costs are
    ignored when ordering and nothing is pre-warmed."""
    balance: bool = True
    """The global scheduler assigns groups to virtual queues. Off: groups are pinned round-robin
    when created; the scheduler only orders each queue."""


class QLMConfig(BaseModel):
    """The `qlm` policy: request groups, virtual queues, RWT estimator, global scheduler, LSOs."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    grouping: GroupingConfig = GroupingConfig()
    """Request-group clustering (δ, re-clustering interval, ...)."""
    solver: GlobalSchedulerConfig = GlobalSchedulerConfig()
    """The global scheduler (ILP or heuristic, time limit, MIP gap, ILP window)."""
    lso: LSOConfig = LSOConfig()
    """Serving operations switched on."""
    slo_percentile: float = Field(0.99, gt=0.5, lt=1.0)
    """Percentile the SLOs are stated at; the RWT estimator's quantile z follows it (p99: 2.33)."""
    pull_window_requests: int = Field(4, ge=1)
    """Requests an engine may hold waiting beyond its running batch; QLM keeps this small so the
    virtual queue, not the engine queue, decides the order."""
    check_interval_s: float = Field(0.5, gt=0)
    """How often (seconds) step ends re-check the RWT predictions for violations."""
    replan_min_interval_s: float = Field(1.0, ge=0)
    """At least this long (seconds) between two global-scheduler runs."""
    rebalance_fraction: float = Field(0.2, gt=0, le=1)
    """Re-plan when the virtual queues' predicted drain times differ by more than this fraction
    of the longest (load balancing as groups grow after placement)."""
    reject_over_slo_factor: float | None = Field(10.0, gt=1.0)
    """Admission: reject an arrival whose predicted wait (the SLO quantile, so pessimistic) exceeds
    this multiple of its TTFT SLO (predicted infeasibility: a scale-up hint). 10 rejects only
    hopeless work: at 3 qlm-wb lost 5.5% of its requests that EDF served in time. None: never."""
    fallback_output_tokens_s: float = Field(200.0, gt=0)
    """Token throughput Θ (output tokens/s) assumed for an instance whose model has no hardware
    profile (e.g. a live CPU replica of a model outside the catalogue)."""
    rwt_snapshot_s: float | None = Field(None, ge=0)
    """RWT-accuracy experiment (Fig. 18): at the first step end at or after this time, predict the
    wait of every queued request from the current order (replacing its arrival-time prediction)
    so later arrivals cannot reorder what is scored. None: predictions at arrival only."""
    lengths: Literal["predicted", "true"] = "predicted"
    """Output lengths from the online length predictor, or the true ones (oracle ablation)."""
    rwt_error: RWTErrorConfig = RWTErrorConfig()
    """The estimator's recent error (always tracked) and, with widen, a decision quantile widened
    by it (rwt_error.py)."""
    tenancy: TenancyConfig = TenancyConfig()
    """Bands (strict criticality order), fairness between tenants (VTC) and shedding."""
    tight: TightClassConfig = TightClassConfig()
    """Direct dispatch of tight TTFT classes past the virtual queues (tight_classes.py)."""
    swap_plan: SwapPlanConfig = SwapPlanConfig()
    """When an instance swaps to the model of a queued group (swap_plan.py)."""
    eviction: EvictionCostConfig = EvictionCostConfig()
    """Whether eviction weighs the victims' re-prefill cost against the wait it saves."""
