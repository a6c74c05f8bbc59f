"""The live scheduler's report delay, measured on a stack's trace, for its simulation.

Live, a request counts as in flight on its replica, in the books every placement decision
reads, from its placement until its completion report reaches the scheduler: the ingress
batches its reports (services/ingress/shard_outbox.py: `interval_ms`, longer while it holds
unspent lease credits) and the scheduler's event loop shares the host's cores. The scheduler's
report log (`report_log_file`, services/scheduler/report_log.py) dates each report twice on
the host's wall clock: when the ingress saw the stream end and when the report reached the
books. Their differences over the trace's served requests are the delays the simulated
scheduler's books hear of each finish after (slomesh/sim/live_view.py), drawn at random, so
the simulator's policy sees the live policy's view and not the engines' exact queues.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from services.scheduler.args import SchedulerArgs
from slomesh.bench.agree.admission_hop import AdmissionHops
from slomesh.sim.ingress import SimIngressConfig
from slomesh.sim.live_view import LiveViewConfig

SERVED = ("stop", "length")
"""Finish reasons of a served stream (others: aborted, failed, never started)."""


def report_delays(path: Path, since_unix_s: float = 0.0) -> list[float]:
    """The delays (s) of the served requests' reports in the log at `path` whose streams ended
    at or after `since_unix_s` (the trace's start: the calibration traces' reports are left
    out); empty without a log."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        if row.get("reason") in SERVED and row["finish_s"] >= since_unix_s:
            out.append(max(0.0, row["reported_s"] - row["finish_s"]))
    return out


def live_view(
    config: dict[str, Any], delays: Sequence[float], seed: int, hops: AdmissionHops | None = None
) -> LiveViewConfig:
    """The live view of the mesh `config` (its scheduler's Status interval) with `delays` and
    the admission `hops` (slomesh/bench/agree/admission_hop.py; None: none measured)."""
    apps = {app["name"]: app.get("args", {}) for app in config["applications"]}
    interval_ms = SchedulerArgs.model_fields["reconcile_interval_ms"].default
    interval_ms = apps.get("scheduler", {}).get("reconcile_interval_ms", interval_ms)
    hops = hops if hops is not None else AdmissionHops()
    return LiveViewConfig(
        report_delays_s=tuple(delays),
        admission_hops_s=hops.by_request,
        admission_hop_s=hops.base_s,
        status_interval_s=interval_ms / 1e3,
        seed=seed,
    )


def sync_call_s(delays: Sequence[float]) -> float:
    """One way of the ingress's `Sync` call to the scheduler, as the report log shows it: the
    quickest report, one the outbox sent at once (a flush) and no batch interval held, spent
    only the call (0 with no report measured)."""
    return min(delays, default=0.0)


def with_fast_path_call(ingress: SimIngressConfig, delays: Sequence[float]) -> SimIngressConfig:
    """`ingress` with its simulated fast path's calls taking `sync_call_s(delays)` each way."""
    fast = ingress.fast_path.model_copy(update={"call_s": sync_call_s(delays)})
    return ingress.model_copy(update={"fast_path": fast})


def describe(delays: Sequence[float], span_s: float = 0.0, replicas: int = 1) -> str:
    """The delays in words for the page ("reported at once" with none); with the trace's
    `span_s`, also how many finished requests each of `replicas` still counted in flight on
    average (Little's law: the delays' sum over the span, per replica)."""
    if not delays:
        return "no report delay measured (reported at once)"
    q = statistics.quantiles(delays, n=10) if len(delays) > 1 else [delays[0]] * 9
    text = (
        f"report delay median {statistics.median(delays) * 1e3:.0f} ms, p10-p90 "
        f"{q[0] * 1e3:.0f}-{q[-1] * 1e3:.0f} ms over {len(delays)} reports"
    )
    if span_s > 0:
        text += f"; {sum(delays) / span_s / replicas:.2f} finished requests per replica in flight"
    return text
