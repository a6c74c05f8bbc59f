"""Report writers, tables and plots: valid JSON with the required keys, PNGs on disk."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from shared.metrics.summary import StackSummary
from shared.report.plots import plot_summaries, plot_sweep
from shared.report.table import SUMMARY_HEADERS, format_class_tables, format_table
from shared.report.writers import write_summary, write_sweep


def _png_ok(path: Path) -> bool:
    return (
        path.is_file() and path.stat().st_size > 0 and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    )


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_format_table_has_stacks_and_attainment(two_summaries: list[StackSummary]) -> None:
    table = format_table(two_summaries)
    lines = table.splitlines()
    assert len(lines) == 2 + len(two_summaries)  # header, rule, one row per policy
    for s, line in zip(two_summaries, lines[2:], strict=True):
        assert s.stack in line
    # fcfs/scorpio: 2 of 6 met -> 33.3 %; chat 50.0, batch 25.0; qlm: nothing met -> 0.0
    fcfs, qlm = _cells(lines[2]), _cells(lines[4])
    assert fcfs[1] == "33.3" and fcfs[2] == "batch 25.0, chat 50.0"
    assert qlm[1] == "0.0" and qlm[2] == "bulk 0.0"
    for header in SUMMARY_HEADERS:
        assert header in lines[0]
    # goodput 0.2, throughput 0.4 r/s, 2.9 tok/s; TTFT 0.75/1.97 s; TPOT 225/492.5 ms, 75 % met;
    # E2E p50 2.75 s; 1 rejected, 3 evictions, 2 swaps; GPU busy 50 %; imbalance 2 s; wall 1.5 s
    assert fcfs[3:] == [
        "0.20",
        "0.40",
        "2.9",
        "0.750 / 1.970",
        "225.0 / 492.5",
        "75.0",
        "2.750",
        "1",
        "3",
        "2",
        "50.0",
        "2.000",
        "1.50",
    ]
    # every line has the same width and the same number of cells (padded for terminals)
    assert len({len(line) for line in lines}) == 1
    assert len({line.count(" | ") for line in lines}) == 1


def test_format_table_missing_values_are_dashes(two_summaries: list[StackSummary]) -> None:
    qlm_line = format_table(two_summaries).splitlines()[4]
    assert "- / -" in qlm_line  # no finished request: no TTFT / TPOT


def test_class_tables_cover_every_class(two_summaries: list[StackSummary]) -> None:
    text = format_class_tables(two_summaries)
    for name in ("batch", "bulk", "chat"):
        assert f"### class {name}" in text
    chat = text.split("### class chat")[1]
    assert "fcfs" in chat and "50.0" in chat and "1.985" in chat


def test_write_summary(tmp_path: Path, two_summaries: list[StackSummary]) -> None:
    out = tmp_path / "run"
    data = write_summary(out, "smoke", 7, 6, two_summaries, extra={"git": "abc", "n": 2})
    loaded = json.loads((out / "summary.json").read_text())
    assert loaded == data
    assert list(loaded) == ["scenario", "seed", "requests", "results", "git", "n"]
    assert (loaded["scenario"], loaded["seed"], loaded["requests"]) == ("smoke", 7, 6)
    assert [r["stack"] for r in loaded["results"]] == ["fcfs", "scorpio", "qlm"]
    assert loaded["results"][0] == two_summaries[0].to_dict()
    assert loaded["results"][0]["slo_attainment"] == 0.333333
    assert loaded["results"][2]["ttft_p50_s"] is None
    md = (out / "summary.md").read_text()
    assert md.startswith("# ") and "smoke" in md
    assert format_table(two_summaries) in md
    assert "### class chat" in md


def test_write_summary_without_extra(tmp_path: Path, two_summaries: list[StackSummary]) -> None:
    data = write_summary(tmp_path, "s", 1, 6, two_summaries[:1])
    assert list(data) == ["scenario", "seed", "requests", "results"]


def test_write_summary_rejects_clashing_extra(
    tmp_path: Path, two_summaries: list[StackSummary]
) -> None:
    with pytest.raises(ValueError, match="results"):
        write_summary(tmp_path, "s", 1, 6, two_summaries, extra={"results": []})


def test_write_sweep(tmp_path: Path, two_summaries: list[StackSummary]) -> None:
    fcfs, scorpio, _ = two_summaries
    sweep = {"fcfs": [(4.0, fcfs), (2.0, fcfs)], "scorpio": [(2.0, scorpio)]}
    data = write_sweep(tmp_path, "ramp", 3, 6, sweep)
    loaded = json.loads((tmp_path / "sweep.json").read_text())
    assert loaded == data
    assert list(loaded) == ["scenario", "seed", "requests", "sweep"]
    assert list(loaded["sweep"]) == ["fcfs", "scorpio"]
    assert [p["rate_rps"] for p in loaded["sweep"]["fcfs"]] == [2.0, 4.0]  # sorted by rate
    assert loaded["sweep"]["scorpio"][0]["goodput_rps"] == 0.2
    md = (tmp_path / "sweep.md").read_text()
    assert "ramp" in md and "33.3" in md
    # scorpio has no 4 r/s point: its pivot cell is a dash
    att_pivot = md.split("## SLO attainment % by arrival rate")[1].split("##")[0]
    row4 = next(line for line in att_pivot.splitlines() if line.startswith("| 4 "))
    assert row4.rstrip(" |").endswith("-")
    for name in ("attainment_vs_rate.png", "goodput_vs_rate.png"):
        assert _png_ok(tmp_path / name), name


def test_plot_summaries(tmp_path: Path, two_summaries: list[StackSummary]) -> None:
    paths = plot_summaries(tmp_path / "plots", two_summaries)
    assert [p.name for p in paths] == ["attainment.png", "latency.png", "throughput.png"]
    for p in paths:
        assert _png_ok(p), p


def test_plot_summaries_wide_latency_range(tmp_path: Path, summary: StackSummary) -> None:
    from dataclasses import replace

    wide = replace(summary, stack="slow", ttft_p99_s=500.0)  # 500 / 0.75 > log threshold
    paths = plot_summaries(tmp_path, [summary, wide])
    assert all(_png_ok(p) for p in paths)


def test_plots_close_their_figures(tmp_path: Path, two_summaries: list[StackSummary]) -> None:
    plot_summaries(tmp_path, two_summaries)
    plot_sweep(tmp_path, {"fcfs": [(1.0, two_summaries[0])]})
    import matplotlib.pyplot as plt

    assert plt.get_fignums() == []


def test_report_modules_do_not_import_pyplot_at_import_time() -> None:
    import subprocess

    code = (
        "import sys; import shared.report.writers, shared.report.plots, shared.report.table; "
        "print('matplotlib.pyplot' in sys.modules)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "False"
