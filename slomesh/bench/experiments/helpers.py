"""Shared pieces of the paper experiments: running a stack over requests, sweeping one stream's
rate, summary tables and multi-panel PNG figures (matplotlib, Agg, imported only when drawing).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from tqdm import tqdm

from services.scheduler.core.global_policy import GlobalPolicy
from services.scheduler.core.qlm.policy import QLMPolicy
from shared.domain import Request
from shared.metrics.summary import StackSummary, summarize
from shared.report.table import fmt_num, fmt_pct, markdown_table
from shared.workloads import WorkloadSpec, generate
from slomesh.bench.scenarios import ScenarioSpec
from slomesh.sim.cluster import ClusterSpec
from slomesh.sim.simulator import Simulator
from slomesh.stacks import STACKS, StackConfig

if TYPE_CHECKING:
    from matplotlib.axes import Axes

Tick = Callable[[int], None]
DPI = 120


def _no_tick(_: int) -> None:
    return None


@contextmanager
def progress(enabled: bool, total: int, desc: str) -> Iterator[Tick]:
    """A tqdm bar over `total` requests on stderr (off when disabled or stderr is no terminal)."""
    quiet = not enabled or not sys.stderr.isatty()
    with tqdm(total=total, disable=quiet, unit="req", desc=desc) as bar:
        yield bar.update


# ---- simulations ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Run:
    """One simulation: its summary and the global policy object it ran (for QLM's counters)."""

    summary: StackSummary
    global_policy: GlobalPolicy

    @property
    def qlm(self) -> QLMPolicy | None:
        return self.global_policy if isinstance(self.global_policy, QLMPolicy) else None


def run_stack(
    cluster: ClusterSpec, stack: StackConfig, requests: Sequence[Request], tick: Tick = _no_tick
) -> Run:
    """Simulate `stack` serving `requests` on `cluster`."""
    sim = Simulator(cluster, stack, requests, progress=tick)
    return Run(summarize(sim.run()), sim.global_policy)


def run_stacks(
    cluster: ClusterSpec,
    stacks: Sequence[str],
    requests: Sequence[Request],
    tick: Tick = _no_tick,
) -> dict[str, Run]:
    """Each named stack (STACKS registry) over the same requests."""
    return {p: run_stack(cluster, STACKS.create(p), requests, tick) for p in stacks}


def with_requests(sc: ScenarioSpec, requests: int) -> ScenarioSpec:
    return sc.model_copy(update={"workload": sc.workload.model_copy(update={"requests": requests})})


def with_stream_rate(workload: WorkloadSpec, stream: str, rate_rps: float) -> WorkloadSpec:
    """A copy with stream `stream` at `rate_rps` and the other streams unchanged."""
    if stream not in {s.name for s in workload.streams}:
        raise ValueError(f"no stream '{stream}' in {[s.name for s in workload.streams]}")
    streams = [
        s.model_copy(update={"rate_rps": rate_rps}) if s.name == stream else s
        for s in workload.streams
    ]
    return WorkloadSpec(streams=streams, requests=workload.requests)


@dataclass(frozen=True, slots=True)
class Point:
    """One (x, stack) run of a sweep."""

    x: float
    stack: str
    summary: StackSummary
    extra: dict[str, Any] = field(default_factory=dict)


def sweep_stream(
    sc: ScenarioSpec,
    stream: str,
    rates: Sequence[float],
    stacks: Sequence[str],
    seed: int,
    tick: Tick = _no_tick,
) -> list[Point]:
    """Every stack at every rate of `stream` (other streams fixed), same seed at every rate."""
    points: list[Point] = []
    for rate in rates:
        requests = generate(with_stream_rate(sc.workload, stream, rate), seed)
        for name, run in run_stacks(sc.cluster, stacks, requests, tick).items():
            points.append(Point(rate, name, run.summary))
    return points


# ---- tables and JSON -------------------------------------------------------------------------
def point_json(p: Point) -> dict[str, Any]:
    return {"x": p.x, "stack": p.stack, **p.extra, **p.summary.to_dict()}


def pivot(points: Sequence[Point], x_label: str, cell: Callable[[StackSummary], str]) -> str:
    """Rows: x values; columns: stacks in first-seen order."""
    stacks = list(dict.fromkeys(p.stack for p in points))
    xs = sorted({p.x for p in points})
    by = {(p.x, p.stack): p.summary for p in points}
    rows = [
        [f"{x:g}", *(cell(by[x, pol]) if (x, pol) in by else "-" for pol in stacks)] for x in xs
    ]
    return markdown_table([x_label, *stacks], rows)


def attainment_cell(s: StackSummary) -> str:
    return fmt_pct(s.slo_attainment)


def throughput_cell(s: StackSummary) -> str:
    return fmt_num(s.throughput_rps, 3)


DETAIL_HEADERS = (
    "SLO attainment %",
    "per-class attainment %",
    "throughput r/s",
    "goodput r/s",
    "TTFT p99 s",
    "rejected",
    "evictions",
    "swaps",
)


def detail_cells(s: StackSummary) -> list[str]:
    classes = ", ".join(f"{k} {fmt_pct(v)}" for k, v in s.attainment_by_class.items())
    return [
        fmt_pct(s.slo_attainment),
        classes or "-",
        fmt_num(s.throughput_rps, 3),
        fmt_num(s.goodput_rps, 3),
        fmt_num(s.ttft_p99_s, 1),
        str(s.rejected),
        str(s.evictions),
        str(s.swaps),
    ]


def detail_table(points: Sequence[Point], x_label: str) -> str:
    rows = [[f"{p.x:g}", p.stack, *detail_cells(p.summary)] for p in points]
    return markdown_table([x_label, "stack", *DETAIL_HEADERS], rows, left=(1, 3))


# ---- figures ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Panel:
    """One subplot. line: one line per series over numeric `x`; bar: grouped bars over the
    labels in `x`; scatter: series of y over `x` (same length), with a y = x diagonal."""

    kind: Literal["line", "bar", "scatter"]
    title: str
    xlabel: str
    ylabel: str
    x: Sequence[float | str]
    series: Mapping[str, Sequence[float | None]]
    ylim: tuple[float, float] | None = None
    logy: bool = False
    logx: bool = False


def _draw(ax: Axes, p: Panel) -> None:
    if p.kind == "bar":
        n = max(len(p.series), 1)
        width = 0.8 / n
        for k, (label, ys) in enumerate(p.series.items()):
            xs = [g + (k - (n - 1) / 2) * width for g in range(len(p.x))]
            ax.bar(xs, [float("nan") if y is None else y for y in ys], width=width, label=label)
        ax.set_xticks(list(range(len(p.x))))
        ax.set_xticklabels([str(v) for v in p.x], rotation=20 if len(p.x) > 4 else 0)
    else:
        xs = [float(v) for v in p.x]
        for label, ys in p.series.items():
            vals = [float("nan") if y is None else y for y in ys]
            if p.kind == "line":
                ax.plot(xs, vals, marker="o", label=label)
            else:
                ax.scatter(xs, vals, s=6, alpha=0.5, label=label)
        if p.kind == "scatter" and xs:
            top = max([*xs, *(y for ys in p.series.values() for y in ys if y is not None)])
            ax.plot([0.0, top], [0.0, top], color="grey", linestyle="--", linewidth=1)
    if p.ylim is not None:
        ax.set_ylim(*p.ylim)
    if p.logy:
        ax.set_yscale("log")
    if p.logx:
        ax.set_xscale("log")
    ax.set_title(p.title, fontsize="medium")
    ax.set_xlabel(p.xlabel)
    ax.set_ylabel(p.ylabel)
    ax.grid(alpha=0.3)
    if p.series:
        ax.legend(fontsize="small")


def save_figure(path: Path, panels: Sequence[Panel], suptitle: str) -> Path:
    """Draw `panels` side by side into one PNG at `path`; return the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    try:
        for ax, panel in zip(axes[0], panels, strict=True):
            _draw(ax, panel)
        fig.suptitle(suptitle)
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=DPI)
    finally:
        plt.close(fig)
    return path


def series_by_policy(
    points: Sequence[Point], value: Callable[[StackSummary], float]
) -> tuple[list[float], dict[str, list[float | None]]]:
    """(sorted x values, stack -> value at each x or None) for a line panel."""
    xs = sorted({p.x for p in points})
    by = {(p.x, p.stack): p.summary for p in points}
    stacks = list(dict.fromkeys(p.stack for p in points))
    series: dict[str, list[float | None]] = {
        pol: [value(by[x, pol]) if (x, pol) in by else None for x in xs] for pol in stacks
    }
    return xs, series


def pct(s: StackSummary) -> float:
    return 100.0 * s.slo_attainment


def rps(s: StackSummary) -> float:
    return s.throughput_rps
