"""The live scheduler's autoscaling signal: per model, the arrivals and completions it sees and
the requests it queues, turned into a `ModelLoad` (then `wire.encode`d for Serve's policy hook).

Θ and P come from the model's hardware profile at the observed mean lengths (QLM Eq. 15), or
from `replica_tokens_s` when given (replicas without a profile, or CPU tests whose simulated
replicas run faster than the profile); start-up is the profile's cold load time plus
`startup_overhead_s`.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from services.scheduler.core.autoscale.signal import ModelLoad
from services.scheduler.core.autoscale.tracker import LoadTracker
from services.scheduler.core.qlm.rwt import InstanceRates
from shared.domain import HardwareProfile, Request


class SignalConfig(BaseModel):
    """How the scheduler measures a model's load for the autoscaler."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    rate_window_s: float = Field(30.0, gt=0)
    """Arrivals counted for the rate, seconds."""
    trend_window_s: float = Field(90.0, gt=0)
    """Rates regressed for the trend, seconds."""
    prior_output_tokens: float = Field(256.0, gt=0)
    """Output tokens per request assumed before any completes."""
    replica_tokens_s: float | None = Field(None, gt=0)
    """Θ per replica, output tokens/s; None: from the profile."""
    prefill_s: float = Field(0.05, ge=0)
    """P when `replica_tokens_s` is given (no profile consulted), seconds."""
    startup_overhead_s: float = Field(30.0, ge=0)
    """Start-up of a replica beyond the profile's load time, seconds."""
    pool_seen_window_s: float = Field(15.0, gt=0)
    """A pool replica that asked for the signal within this window counts as running (Serve
    records custom metrics every ~2 s), seconds."""


class ScalingSignals:
    def __init__(self, config: SignalConfig | None = None) -> None:
        self.cfg = config if config is not None else SignalConfig()
        self._trackers: dict[str, LoadTracker] = {}
        self._inputs: dict[str, tuple[int, int]] = {}
        self._seen: dict[str, dict[str, float]] = {}

    def _tracker(self, model: str) -> LoadTracker:
        tr = self._trackers.get(model)
        if tr is None:
            c = self.cfg
            tr = LoadTracker(
                model, c.rate_window_s, c.prior_output_tokens, trend_window_s=c.trend_window_s
            )
            self._trackers[model] = tr
        return tr

    def arrival(self, request: Request, now_s: float) -> None:
        self._tracker(request.model).arrival(now_s)
        total, n = self._inputs.get(request.model, (0, 0))
        self._inputs[request.model] = (total + request.input_tokens, n + 1)

    def seen(self, pool: str, replica_id: str, now_s: float) -> int:
        """Pool replica `replica_id` asked for the signal now; returns how many replicas of
        `pool` asked within `pool_seen_window_s` (its running replicas, as far as the
        scheduler knows: a stopped one drops out after the window)."""
        last = self._seen.setdefault(pool, {})
        last[replica_id] = now_s
        for rid in [r for r, t in last.items() if t < now_s - self.cfg.pool_seen_window_s]:
            del last[rid]
        return len(last)

    def finished(self, model: str, output_tokens: int) -> None:
        if output_tokens > 0:
            self._tracker(model).finished(output_tokens)

    def load(
        self,
        model: str,
        now_s: float,
        *,
        queued: Sequence[Request],
        ongoing: int,
        profile: HardwareProfile | None,
        ready: int = 1,
        starting: int = 0,
    ) -> ModelLoad:
        """The model's load now; `queued` are its requests waiting in the scheduler."""
        tr = self._tracker(model)
        total, n = self._inputs.get(model, (0, 0))
        mean_in = total / n if n else 512.0
        c = self.cfg
        if c.replica_tokens_s is not None or profile is None:
            theta, prefill = c.replica_tokens_s or 200.0, c.prefill_s
            startup = c.startup_overhead_s
        else:
            rates = InstanceRates.from_profile(profile, mean_in, tr.mean_output_tokens)
            theta, prefill = rates.theta_tok_s, rates.prefill_s
            startup = profile.weight_bytes / profile.cold_load_bytes_s + c.startup_overhead_s
        return tr.snapshot(
            now_s,
            ready=ready,
            starting=starting,
            ongoing=float(ongoing + len(queued)),
            queue_slacks_s=[r.ttft_deadline_abs_s - now_s for r in queued],
            replica_tokens_s=theta,
            prefill_s=prefill,
            startup_s=startup,
        )
