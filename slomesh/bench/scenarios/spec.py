"""A named, seeded benchmark scenario: workload + cluster + the stacks it compares by default."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from shared.workloads import WorkloadSpec
from slomesh.sim.cluster import ClusterSpec


class ScenarioSpec(BaseModel):
    """Everything `slomesh bench --scenario NAME` needs besides the stacks and the seed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    """Registry name."""
    description: str
    """One line: what is served, on what, and what the default rate means."""
    paper_setup: str
    """What the paper ran and how this scenario scales it down (cluster, rates, data)."""
    workload: WorkloadSpec
    """Streams, classes, lengths; its total rate is the scenario's default rate."""
    cluster: ClusterSpec
    """The serving instances."""
    default_stacks: list[str] = Field(min_length=1)
    """Serving stacks compared when --stacks is not given."""
    sweep_rates_rps: list[float] = Field(default_factory=list)
    """Suggested rates for --sweep-rates (total requests/s)."""
    capacity_probe_requests: int | None = Field(None, ge=1)
    """Requests per `--capacity` probe when --requests is not given (None: min(workload
    requests, 1,000)); scenarios whose behaviour needs longer runs (conversations reaching
    their later turns) set more."""
    capacity_probe_deadlines: float | None = Field(None, gt=0)
    """Each `--capacity` probe's arrivals last at least this many times the scenario's longest
    TTFT deadline, at every rate (more requests than the count where the rate is high), so a
    queue that grows is seen growing past every deadline; None: the count alone. For scenarios
    whose longest deadline is long next to a probe's arrivals at the rates searched."""

    @property
    def default_rate_rps(self) -> float:
        return self.workload.total_rate_rps
