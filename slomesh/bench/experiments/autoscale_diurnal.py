"""`autoscale-diurnal`: SLO-driven autoscaling vs Ray Serve's ongoing-requests policy vs a fixed
fleet, over a compressed diurnal day with the Azure conversation trace's burstiness.

Setup (slomesh/bench/scenarios/diurnal.py): Llama-3.1-8B on A100-80GB replicas, the `edf` stack
(least-outstanding routing, EDF engine queues), 70% `interactive` (TTFT 20 s) / 30% `batch-1`
(60 s), rate 1.5 -> 15 -> 1.5 requests/s over a day compressed into one hour. A replica
serves 38 s after it is started (8 s cold load from the profile + 30 s engine start-up) and is
paid for from its start. Policies (services/scheduler/core/autoscale/):
- `slo` with its defaults;
- `ongoing-requests` with Serve's delays (upscale 30 s, downscale 600 s, look-back 30 s) at
  several targets, and once with the `slo` policy's 120 s scale-down delay (so the delay is not
  what separates them);
- `fixed` at several sizes, the smallest meeting 95% being the fleet sized for the peak.
Reported per policy: SLO attainment (all, per class), replica-hours, scale events, peak replicas.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

from services.scheduler.core.autoscale.config import AutoscaleConfig
from shared.metrics.summary import summarize
from shared.report.table import fmt_num, markdown_table
from slomesh.bench.experiments.base import Experiment, ExperimentArgs, ExperimentOutput
from slomesh.bench.scenarios.diurnal import DiurnalSpec, diurnal_requests
from slomesh.sim.autoscale import AutoscaledSimulator
from slomesh.sim.cluster import ClusterSpec, InstanceSpec
from slomesh.stacks import STACKS

TARGET = 0.95
"""Attainment the comparison asks for."""


def _variants(max_points: int | None) -> list[tuple[str, dict[str, Any], int]]:
    """(label, AutoscaleConfig fields, initial replicas)."""
    out: list[tuple[str, dict[str, Any], int]] = [("slo", {"policy": "slo"}, 1)]
    for target in (32, 64, 128):
        cfg = {
            "policy": "ongoing-requests",
            "ongoing_requests": {"target_ongoing_requests": target},
        }
        out.append((f"ongoing-requests target={target}", cfg, 1))
    fast = {"target_ongoing_requests": 128, "downscale_delay_s": 120.0}
    label = "ongoing-requests target=128, downscale 120 s"
    out.append((label, {"policy": "ongoing-requests", "ongoing_requests": fast}, 1))
    for n in (2, 3, 4):
        out.append((f"fixed {n}", {"policy": "fixed", "fixed": {"replicas": n}}, n))
    if max_points is not None:
        out = out[:1] + out[1:5][:max_points] + out[5:][:max_points]
    return out


def run_variant(
    label: str, fields: dict[str, Any], initial: int, day: DiurnalSpec, seed: int
) -> dict[str, Any]:
    """One policy over the day (a top-level function: it runs in a worker process)."""
    requests = diurnal_requests(day, seed)
    cluster = ClusterSpec(instances=[InstanceSpec(gpu="A100-80GB", models=[day.model])])
    sim = AutoscaledSimulator(
        cluster, STACKS.create("edf"), requests, AutoscaleConfig.model_validate(fields), initial
    )
    run = sim.run()
    summary = summarize(run)
    end = max(run.end_s, max(t for t, _, _ in sim.log.timeline))
    return {
        "policy": label,
        "config": fields,
        "requests": len(requests),
        "slo_attainment": summary.slo_attainment,
        "attainment_by_class": dict(summary.attainment_by_class),
        "replica_hours": sim.log.replica_hours(end),
        "scale_events": len(sim.log.events),
        "peak_replicas": max(r + s for _, r, s in sim.log.timeline),
        "timeline": sim.log.timeline,
        "events": [(e.time_s, e.replicas_from, e.replicas_to, e.reason) for e in sim.log.events],
        "wall_s": run.wall_s,
    }


class AutoscaleDiurnal(Experiment):
    name: ClassVar[str] = "autoscale-diurnal"
    figure: ClassVar[str] = "Fig. none; beyond the paper"
    description: ClassVar[str] = (
        "slo vs ongoing-requests vs fixed autoscaling over a compressed diurnal day (Azure conv "
        "burstiness): SLO attainment, replica-hours, scale events"
    )
    default_requests: ClassVar[int] = DiurnalSpec().expected_requests()

    def execute(self, args: ExperimentArgs, out_dir: Path) -> ExperimentOutput:
        day = DiurnalSpec()
        if args.requests is not None:  # a shorter day with the same rates
            day = day.model_copy(
                update={"day_s": day.day_s * args.requests / day.expected_requests()}
            )
        variants = _variants(args.max_points)
        with ProcessPoolExecutor(max_workers=2) as pool:
            futures = [
                pool.submit(run_variant, label, fields, n, day, args.seed)
                for label, fields, n in variants
            ]
            rows = [f.result() for f in futures]
        fixed_ok = [
            r for r in rows if r["policy"].startswith("fixed") and r["slo_attainment"] >= TARGET
        ]
        peak = min(fixed_ok, key=lambda r: r["replica_hours"]) if fixed_ok else None
        table = markdown_table(
            [
                "policy",
                "attainment %",
                "per class %",
                "replica-hours",
                "scale events",
                "peak replicas",
            ],
            [
                [
                    r["policy"] + (" (sized for peak)" if r is peak else ""),
                    fmt_num(100 * r["slo_attainment"], 2),
                    ", ".join(f"{k} {100 * v:.1f}" for k, v in r["attainment_by_class"].items()),
                    fmt_num(r["replica_hours"], 3),
                    str(r["scale_events"]),
                    str(r["peak_replicas"]),
                ]
                for r in rows
            ],
        )
        notes = [
            f"day {day.day_s:.0f} s, rate {day.trough_rps:g} -> {day.peak_rps:g} r/s, "
            f"{rows[0]['requests']} requests, seed {args.seed}; target attainment {TARGET:.0%}"
        ]
        figure = _plot(out_dir / "replicas.png", day, rows)
        return ExperimentOutput(
            results={
                "day": day.model_dump(),
                "rows": rows,
                "fixed_for_peak": peak and peak["policy"],
            },
            tables=[("autoscaling over the day", table)],
            figures=[figure],
            notes=notes,
        )


def _plot(path: Path, day: DiurnalSpec, rows: list[dict[str, Any]]) -> Path:
    """Replicas (ready + starting) over the day per policy, with the arrival rate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    try:
        for r in rows:
            if r["policy"].startswith("fixed"):
                continue
            ts = [t for t, _, _ in r["timeline"]]
            ax.step(ts, [a + b for _, a, b in r["timeline"]], where="post", label=r["policy"])
        ax.set_xlabel("time (s)")
        ax.set_ylabel("replicas (ready + starting)")
        rate = ax.twinx()
        grid = [day.day_s * k / 200 for k in range(201)]
        rate.plot(grid, [day.rate(t) for t in grid], color="grey", linestyle=":")
        rate.set_ylabel("arrival rate (r/s, dotted)")
        ax.legend(loc="upper left", fontsize=7)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
    finally:
        plt.close(fig)
    return path
