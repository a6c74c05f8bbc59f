"""Typed configuration of bands, fairness and shedding (a QLMConfig field, `tenancy`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from services.scheduler.core.fairness.vtc import VTCConfig


class TenancyConfig(BaseModel):
    """Which tenant's and which band's work a replica pulls next, and what is shed first."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    bands: bool = True
    """Serve bands strictly by criticality: a replica pulls from the most critical band that has
    queued work; lower bands wait (and sheddable ones are shed) until it is empty. Off: the
    virtual queue's order alone decides."""
    fairness: Literal["vtc", "off"] = "vtc"
    """Inside a band, the tenant served next: `vtc` (the virtual token counter, fairness/vtc.py),
    or `off` (the virtual queue's order: FCFS / earliest deadline across tenants)."""
    vtc: VTCConfig = VTCConfig()
    """Counter weights and per-tenant weights."""
    shed: bool = True
    """Shed sheddable work (criticality < 0) first under saturation: a sheddable arrival is
    rejected at once when more critical work waits in the global queue or the queue ahead
    cannot drain within its TTFT SLO, and queued sheddable requests are dropped (answered at
    once) when more critical work is predicted late."""
    expire_late: bool = True
    """With several tenants or bands: a queued request whose TTFT deadline has passed is
    answered (rejected) instead of served late, as the live admission core does
    (`expire_queued`), so late work does not take capacity from work still in time."""
    shed_backlog_factor: float = Field(1.0, gt=0)
    """A sheddable arrival is rejected when the shortest predicted backlog of the replicas
    serving its model exceeds this multiple of its TTFT SLO."""
    tenant_idle_s: float = Field(600.0, gt=0, allow_inf_nan=False)
    """A tenant with nothing queued or running and no arrival for this long is forgotten (its
    VTC counter and tokens; fairness/vtc.py), seconds of the requests' arrival clock."""
    max_tenant_series: int = Field(64, ge=1)
    """Tenants exported with their own `tenant` label in the per-tenant metrics (the first
    live ones, kept while they live); the rest are exported as `other`."""
