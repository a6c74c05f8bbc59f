"""The live scheduler's view of its replicas, in the simulator.

Live, the global policy never sees an engine: it reads the scheduler's books of each replica
(services/scheduler/core/live_view.py `LiveReplica`): a request counts as in flight there from
its placement until its completion report reaches the scheduler, which comes after its stream
has ended (the ingress batches its reports, services/ingress/shard_outbox.py, and the
scheduler's loop may be busy), and the TTFT guard reads each replica's queue as its last
`Status` answer, asked every `reconcile_interval_ms`. The engines' steps are never heard of: a
report frees a place and lets the replica pull (`AdmissionCore.report`), and a tick does while
work is queued.

With a `LiveViewConfig` the simulator runs that view (slomesh/sim/scheduler.py,
slomesh/sim/simulator.py): the policy reads the same `LiveReplica` books, kept by the same
admission code, each finish reaches them `report delay` later, drawn from the delays measured
live (`report_delays_s`, e.g. from the scheduler's `report_log_file`:
slomesh/bench/agree/report_delay.py), and the guard's reports are the engines' queues taken
every `status_interval_s`, starting at a seeded phase. Each arrival reaches the scheduler's
admission check its measured hop after the ingress let it in (`admission_hops_s`, by request,
e.g. from the same log: slomesh/bench/agree/admission_hop.py; else `admission_hop_s`), and the
TTFT guard counts that hop as time spent, as live (services/scheduler/core/ttft_admission.py).
`seed` draws the delays and that phase: runs over several seeds show how far the simulated
outcome moves with the timing alone. Without one, the policy reads the simulated engines' exact
state and hears every step end.
"""

from __future__ import annotations

import random

from pydantic import BaseModel, ConfigDict, Field


class LiveViewConfig(BaseModel):
    """The scheduler's bookkeeping view, as the live scheduler has it (module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    report_delays_s: tuple[float, ...] = ()
    """Measured delays from a stream's end to its report reaching the scheduler, seconds; each
    simulated finish draws one (empty: reported at once)."""
    admission_hops_s: dict[str, float] = {}
    """Measured hops from the ingress letting a request in (its arrival) to the scheduler's
    admission check, seconds, by request id: the simulated scheduler checks the request that
    long after its arrival, and the TTFT guard counts the hop as time spent."""
    admission_hop_s: float = Field(0.0, ge=0)
    """The hop of a request without a measured one, seconds."""
    status_interval_s: float = Field(1.0, gt=0)
    """How often the scheduler asks each replica's Status (its `reconcile_interval_ms` / 1000):
    the TTFT guard's queue reports are taken this often."""
    seed: int = Field(0, ge=0)
    """Seed of the delay draws and of the first Status probe's phase."""


class LiveTiming:
    """The draws of one run under `LiveViewConfig` (seeded: the same config, the same run)."""

    def __init__(self, config: LiveViewConfig) -> None:
        self.config = config
        self._rng = random.Random(config.seed)
        self._delays = sorted(max(0.0, d) for d in config.report_delays_s)

    def report_delay_s(self) -> float:
        """One delay from a finish to its report (a measured one, drawn at random; 0 with
        none measured)."""
        return self._rng.choice(self._delays) if self._delays else 0.0

    def admission_hop_s(self, request_id: str) -> float:
        """The hop from `request_id`'s arrival to its admission check (its measured one, else
        the config's constant)."""
        hops = self.config.admission_hops_s
        return max(0.0, hops.get(request_id, self.config.admission_hop_s))

    def first_probe_s(self, start_s: float) -> float:
        """When the first Status probe after `start_s` is answered (uniform over one
        interval: the live probes run on their own clock)."""
        return start_s + self._rng.uniform(0.0, self.config.status_interval_s)
