"""PNG charts of stack summaries and rate sweeps (matplotlib, Agg backend, object API).

matplotlib is imported and switched to Agg only inside the plotting functions, so importing this
module has no side effects. Every figure is closed after it is saved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from shared.metrics.summary import StackSummary
from shared.report.table import class_names

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# A max/min ratio above this among positive latencies switches the latency chart to log scale.
LOG_SCALE_RATIO = 50.0
DPI = 120


def _new_figure(width: float, height: float) -> tuple[Figure, Axes]:
    """A fresh figure and axes on the Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(width, height))
    return fig, ax


def _save(fig: Figure, path: Path) -> Path:
    """Save `fig` to `path` and close it."""
    import matplotlib.pyplot as plt

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.tight_layout()
        fig.savefig(path, dpi=DPI)
    finally:
        plt.close(fig)
    return path


def _grouped_bars(
    ax: Axes,
    groups: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
) -> None:
    """Bars for each series side by side within each group; None is drawn as no bar."""
    n = max(len(series), 1)
    width = 0.8 / n
    for k, (label, values) in enumerate(series.items()):
        xs = [g + (k - (n - 1) / 2) * width for g in range(len(groups))]
        heights = [float("nan") if v is None else v for v in values]
        ax.bar(xs, heights, width=width, label=label)
    ax.set_xticks(list(range(len(groups))))
    ax.set_xticklabels(list(groups), rotation=20 if len(groups) > 4 else 0)
    if series:
        ax.legend(fontsize="small")


def _width(n_groups: int) -> float:
    return max(6.0, 1.6 * n_groups + 2.0)


def plot_attainment(out_dir: Path, summaries: list[StackSummary]) -> Path:
    """attainment.png: grouped bars of overall and per-class SLO attainment % per stack."""
    stacks = [s.stack for s in summaries]
    series: dict[str, list[float | None]] = {
        "overall": [100.0 * s.slo_attainment for s in summaries]
    }
    for name in class_names(summaries):
        series[name] = [
            None if name not in s.attainment_by_class else 100.0 * s.attainment_by_class[name]
            for s in summaries
        ]
    fig, ax = _new_figure(_width(len(stacks)), 4.5)
    _grouped_bars(ax, stacks, series)
    ax.set_ylim(0.0, 105.0)
    ax.set_ylabel("SLO attainment %")
    ax.set_title("SLO attainment by stack (overall and per class)")
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, out_dir / "attainment.png")


def plot_latency(out_dir: Path, summaries: list[StackSummary]) -> Path:
    """latency.png: TTFT p50/p99 and E2E p50 per stack; log scale when the range is wide."""
    stacks = [s.stack for s in summaries]
    series: dict[str, list[float | None]] = {
        "TTFT p50": [s.ttft_p50_s for s in summaries],
        "TTFT p99": [s.ttft_p99_s for s in summaries],
        "E2E p50": [s.e2e_p50_s for s in summaries],
    }
    fig, ax = _new_figure(_width(len(stacks)), 4.5)
    _grouped_bars(ax, stacks, series)
    positive = [v for vs in series.values() for v in vs if v is not None and v > 0]
    if positive and max(positive) / min(positive) > LOG_SCALE_RATIO:
        ax.set_yscale("log")
    ax.set_ylabel("seconds")
    ax.set_title("Latency by stack")
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, out_dir / "latency.png")


def plot_throughput(out_dir: Path, summaries: list[StackSummary]) -> Path:
    """throughput.png: goodput (SLO-met r/s) next to throughput (finished r/s) per stack."""
    stacks = [s.stack for s in summaries]
    series: dict[str, list[float | None]] = {
        "goodput": [s.goodput_rps for s in summaries],
        "throughput": [s.throughput_rps for s in summaries],
    }
    fig, ax = _new_figure(_width(len(stacks)), 4.5)
    _grouped_bars(ax, stacks, series)
    ax.set_ylabel("requests / s")
    ax.set_title("Goodput vs throughput by stack")
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, out_dir / "throughput.png")


def plot_summaries(out_dir: Path, summaries: list[StackSummary]) -> list[Path]:
    """Write attainment.png, latency.png and throughput.png under `out_dir`; return their paths."""
    return [
        plot_attainment(out_dir, summaries),
        plot_latency(out_dir, summaries),
        plot_throughput(out_dir, summaries),
    ]


def _plot_vs_rate(
    path: Path,
    sweep: Mapping[str, Sequence[tuple[float, StackSummary]]],
    value_label: str,
    title: str,
    scale: float,
    attr: str,
) -> Path:
    fig, ax = _new_figure(7.0, 4.5)
    for stack, points in sweep.items():
        ordered = sorted(points, key=lambda p: p[0])
        xs = [rate for rate, _ in ordered]
        ys = [scale * float(getattr(s, attr)) for _, s in ordered]
        ax.plot(xs, ys, marker="o", label=stack)
    if attr == "slo_attainment":
        ax.set_ylim(0.0, 105.0)
    ax.set_xlabel("arrival rate (r/s)")
    ax.set_ylabel(value_label)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if sweep:
        ax.legend(fontsize="small")
    return _save(fig, path)


def plot_sweep(
    out_dir: Path, sweep: Mapping[str, Sequence[tuple[float, StackSummary]]]
) -> list[Path]:
    """Write attainment_vs_rate.png and goodput_vs_rate.png: one line per stack."""
    return [
        _plot_vs_rate(
            out_dir / "attainment_vs_rate.png",
            sweep,
            "SLO attainment %",
            "SLO attainment vs arrival rate",
            100.0,
            "slo_attainment",
        ),
        _plot_vs_rate(
            out_dir / "goodput_vs_rate.png",
            sweep,
            "goodput (SLO-met r/s)",
            "Goodput vs arrival rate",
            1.0,
            "goodput_rps",
        ),
    ]
