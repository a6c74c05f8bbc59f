"""`qlm-rwt-live`: the RWT estimator (QLM Fig. 18) scored inside a live, overloaded trace.

The paper's setting (a queue that drains, nothing overtaking) is `qlm-rwt`; this one shows what
the estimate is worth for admission while arrivals keep reordering the queue.

Paper: R² of estimated vs measured waiting time grows with the number of request groups queued
and reaches 0.99 with four groups; with short queues the estimates are conservative (high). Here:
`qlm` on the `qlm-wa` scenario at 6 req/s in all (default 4.5) so queues are deep; measured
wait = time an instance pulls the request - its arrival. Two ways of predicting, each scored for
the point (mean) prediction the estimator is judged by and the p99 one the scheduler acts on
(biased upward by design):
- arrival: every request predicted once, when it arrives. Later, tighter arrivals are inserted
  ahead of it (EDF placement, replans), which no queue-based estimate can foresee - batch-2
  (1 h SLO) requests wait for all interactive work that arrives after them.
- snapshot: a second run with QLMConfig.rwt_snapshot_s at mid-trace: every request queued at
  that moment is predicted from the current order; only those requests are scored (arrival before
  the snapshot, pulled after it). Both sides include the wait already spent before the snapshot.
R² (1 - SS_res/SS_tot against measured = predicted, as RWTAccuracy scores it) and the r² of a
linear fit (squared correlation: how well the estimate ranks and scales waits, bias aside) are
binned by the groups queued up to and including the request's own group at prediction time
(1, 2-3, 4-7, 8+), and split by SLO class.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from services.scheduler.core.qlm.rwt_accuracy import RWTAccuracy, WaitPair, r2_score
from shared.report.table import fmt_num, markdown_table
from shared.workloads import generate
from slomesh.bench.experiments.base import Experiment, ExperimentArgs, ExperimentOutput
from slomesh.bench.experiments.helpers import Panel, progress, run_stack, save_figure, with_requests
from slomesh.bench.scenarios import SCENARIOS
from slomesh.stacks import stack as qlm_stack

EDGES = (1, 2, 4, 8)
MAX_SCATTER = 3000
Scores = dict[str, RWTAccuracy]
"""prediction kind ("point", "p99") -> scored pairs."""


def fit_r2(pairs: Sequence[WaitPair]) -> float | None:
    """Squared Pearson correlation: R² of the best linear fit measured ~ a + b·predicted (what
    R² of a regression reports), as opposed to `r2_score`'s R² against measured = predicted."""
    if len(pairs) < 2:
        return None
    x = np.asarray([p.predicted_wait_s for p in pairs])
    y = np.asarray([p.measured_wait_s for p in pairs])
    if float(np.std(x)) == 0.0 or float(np.std(y)) == 0.0:
        return None
    return float(np.corrcoef(x, y)[0, 1] ** 2)


def subsets(acc: RWTAccuracy, cls: dict[str, str]) -> list[tuple[str, list[WaitPair]]]:
    """(label, pairs): all, each groups-queued bin of EDGES (1, 2-3, 4-7, 8+), each SLO class."""
    pairs = acc.pairs()
    out = [("all", list(pairs))]
    for i, lo in enumerate(EDGES):
        hi = EDGES[i + 1] if i + 1 < len(EDGES) else None
        label = f"{lo}+" if hi is None else (str(lo) if hi == lo + 1 else f"{lo}-{hi - 1}")
        sel = [p for p in pairs if p.groups_queued >= lo and (hi is None or p.groups_queued < hi)]
        out.append((f"groups {label}", sel))
    for name in sorted(set(cls.values())):
        out.append((f"class {name}", [p for p in pairs if cls.get(p.request_id) == name]))
    return out


def _r2(pairs: Sequence[WaitPair]) -> float | None:
    return r2_score([p.predicted_wait_s for p in pairs], [p.measured_wait_s for p in pairs])


def queued_at(acc: RWTAccuracy, t_s: float, arrival: dict[str, float]) -> RWTAccuracy:
    """The pairs of requests that arrived before `t_s` and were pulled at or after it."""
    out = RWTAccuracy()
    for p in acc.pairs():
        a = arrival[p.request_id]
        if a < t_s <= a + p.measured_wait_s:
            out.predict(p.request_id, p.predicted_wait_s, p.queue_size, p.groups_queued)
            out.observe(p.request_id, p.measured_wait_s)
    return out


class QLMRWTLive(Experiment):
    """Fig. 18: R² of the RWT estimator by groups queued, at arrival and from a snapshot."""

    name: ClassVar[str] = "qlm-rwt-live"
    figure: ClassVar[str] = "Fig. 18"
    description: ClassVar[str] = (
        "qlm on qlm-wa at 6 req/s (deep queues): R² of predicted vs measured waits by groups "
        "queued, point and p99 predictions, made at arrival or from a mid-trace snapshot"
    )
    default_requests: ClassVar[int] = 3500
    scenario: ClassVar[str] = "qlm-wa"
    rate_rps: ClassVar[float] = 6.0
    snapshot_fraction: ClassVar[float] = 0.5
    """Snapshot time as a fraction of the last arrival time."""

    def execute(self, args: ExperimentArgs, out_dir: Path) -> ExperimentOutput:
        sc = with_requests(SCENARIOS.create(self.scenario), self.requests(args))
        requests = generate(sc.workload.with_total_rate(self.rate_rps), args.seed)
        snap_s = self.snapshot_fraction * requests[-1].arrival_s
        arrival = {r.request_id: r.arrival_s for r in requests}
        modes: dict[str, Scores] = {}
        with progress(args.progress, 2 * len(requests), self.name) as tick:
            run = run_stack(sc.cluster, qlm_stack("qlm"), requests, tick)
            snap = run_stack(
                sc.cluster, qlm_stack("qlm", {"rwt_snapshot_s": snap_s}), requests, tick
            )
        for key, r in (("arrival", run), ("snapshot", snap)):
            qlm = r.qlm
            assert qlm is not None, "the qlm stack runs a QLMPolicy"
            modes[key] = {"point": qlm.accuracy, "p99": qlm.accuracy_quantile}
        modes["snapshot"] = {k: queued_at(a, snap_s, arrival) for k, a in modes["snapshot"].items()}
        cls = {r.request_id: r.slo.class_name for r in requests}
        results: dict[str, Any] = {
            "scenario": self.scenario,
            "rate_rps": self.rate_rps,
            "snapshot_s": snap_s,
            "attainment": run.summary.slo_attainment,
            "edges_groups_queued": list(EDGES),
            "evictions": run.summary.evictions,
        }
        rows: list[list[str]] = []
        bins: dict[str, dict[str, list[float | None]]] = {"R²": {}, "fit r²": {}}
        for mode, scores in modes.items():
            results[mode] = {}
            for kind, acc in scores.items():
                subs = [(label, sel, _r2(sel), fit_r2(sel)) for label, sel in subsets(acc, cls)]
                results[mode][kind] = [
                    {"subset": label, "n": len(sel), "r2": r2, "fit_r2": fit}
                    for label, sel, r2, fit in subs
                ]
                rows += [
                    [mode, kind, label, str(len(sel)), fmt_num(r2, 3), fmt_num(fit, 3)]
                    for label, sel, r2, fit in subs
                ]
                grouped = [x for x in subs if x[0].startswith("groups ")]
                bins["R²"][f"{mode} {kind}"] = [r2 for _, _, r2, _ in grouped]
                bins["fit r²"][f"{mode} {kind}"] = [fit for _, _, _, fit in grouped]
        headers = ["predicted", "prediction", "subset", "pairs", "R² (y = x)", "fit r²"]
        return ExperimentOutput(
            results=results,
            tables=[("R² of predicted vs measured wait", markdown_table(headers, rows, (0, 1, 2)))],
            figures=[self._figure(modes, bins, out_dir)],
            notes=[
                f"qlm on {self.scenario} at {self.rate_rps:g} req/s: SLO attainment "
                f"{100 * run.summary.slo_attainment:.1f}%, {run.summary.evictions} evictions",
                f"snapshot at t = {snap_s:.0f} s; measured wait: arrival to pull into an engine",
            ],
        )

    def _figure(
        self, modes: dict[str, Scores], bins: dict[str, dict[str, list[float | None]]], out: Path
    ) -> Path:
        labels = [label.removeprefix("groups ") for label, _ in subsets(RWTAccuracy(), {})[1:]]
        points = [  # (predicted, measured, mode): one shared x axis, one y series per mode
            (p.predicted_wait_s, p.measured_wait_s, mode)
            for mode, scores in modes.items()
            for p in scores["point"].pairs()[:: max(1, len(scores["point"]) // MAX_SCATTER)]
        ]
        xs = [x for x, _, _ in points]
        ys = {mode: [y if m == mode else None for _, y, m in points] for mode in modes}
        return save_figure(
            out / f"{self.name}.png",
            [
                Panel(
                    "bar",
                    "R² vs measured = predicted",
                    "groups queued",
                    "R²",
                    labels,
                    bins["R²"],
                    (-1, 1.05),
                ),
                Panel(
                    "bar",
                    "r² of a linear fit",
                    "groups queued",
                    "r²",
                    labels,
                    bins["fit r²"],
                    (0, 1.05),
                ),
                Panel(
                    "scatter",
                    "Point prediction vs measured wait",
                    "predicted wait (s)",
                    "measured wait (s)",
                    xs,
                    ys,
                ),
            ],
            f"{self.name} ({self.figure}): RWT estimator, {self.scenario} at {self.rate_rps:g} r/s",
        )
