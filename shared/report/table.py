"""Markdown tables of stack summaries, padded so they also read well in a terminal."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from shared.metrics.summary import StackSummary

MISSING = "-"

SUMMARY_HEADERS: tuple[str, ...] = (
    "stack",
    "SLO attainment %",
    "per-class attainment",
    "goodput r/s",
    "throughput r/s",
    "tok/s",
    "TTFT p50/p99 s",
    "TPOT p50/p99 ms",
    "TPOT met (admitted) %",
    "E2E p50 s",
    "rejected",
    "evictions",
    "swaps",
    "GPU busy %",
    "load imbalance s",
    "wall s",
)

CLASS_HEADERS: tuple[str, ...] = (
    "stack",
    "requests",
    "SLO attainment %",
    "TTFT p50 s",
    "TTFT p99 s",
    "TPOT p50 ms",
    "E2E p50 s",
)


def fmt_num(value: float | None, decimals: int = 3, scale: float = 1.0) -> str:
    """`value * scale` with fixed decimals, or "-" when missing."""
    if value is None:
        return MISSING
    return f"{value * scale:.{decimals}f}"


def fmt_pct(fraction: float | None, decimals: int = 1) -> str:
    """A fraction in 0..1 as a percentage without the sign, e.g. 0.5 -> "50.0"."""
    return fmt_num(fraction, decimals, 100.0)


def fmt_pair(a: float | None, b: float | None, decimals: int = 3, scale: float = 1.0) -> str:
    """Two values as "a / b"."""
    return f"{fmt_num(a, decimals, scale)} / {fmt_num(b, decimals, scale)}"


def _cell(text: str) -> str:
    """Escape pipes so a cell cannot break the markdown table."""
    return text.replace("|", "\\|")


def markdown_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], left: Collection[int] = (0,)
) -> str:
    """A padded markdown table; the columns numbered in `left` are left-aligned, others right."""
    head = [_cell(h) for h in headers]
    body = [[_cell(c) for c in row] for row in rows]
    for row in body:
        if len(row) != len(head):
            raise ValueError(f"row has {len(row)} cells, expected {len(head)}")
    widths = [max([len(head[i]), 3, *(len(r[i]) for r in body)]) for i in range(len(head))]

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.ljust(widths[i]) if i in left else c.rjust(widths[i]) for i, c in enumerate(cells)
        ]
        return "| " + " | ".join(parts) + " |"

    rule = ["-" * w if i in left else "-" * (w - 1) + ":" for i, w in enumerate(widths)]
    return "\n".join([line(head), line(rule), *(line(r) for r in body)])


def format_class_attainment(summary: StackSummary) -> str:
    """Per-class attainment as "batch 25.0, chat 50.0" (percent), or "-" without classes."""
    if not summary.attainment_by_class:
        return MISSING
    return ", ".join(f"{name} {fmt_pct(v)}" for name, v in summary.attainment_by_class.items())


def summary_row(s: StackSummary) -> list[str]:
    """One row of `format_table` for summary `s`."""
    return [
        s.stack,
        fmt_pct(s.slo_attainment),
        format_class_attainment(s),
        fmt_num(s.goodput_rps, 2),
        fmt_num(s.throughput_rps, 2),
        fmt_num(s.throughput_tok_s, 1),
        fmt_pair(s.ttft_p50_s, s.ttft_p99_s),
        fmt_pair(s.tpot_p50_s, s.tpot_p99_s, 1, 1000.0),
        fmt_pct(s.tpot_attainment_admitted),
        fmt_num(s.e2e_p50_s),
        str(s.rejected),
        str(s.evictions),
        str(s.swaps),
        fmt_pct(s.gpu_busy),
        fmt_num(s.load_imbalance_s),
        fmt_num(s.wall_s, 2),
    ]


def format_table(summaries: list[StackSummary]) -> str:
    """One markdown row per stack: attainment, goodput, throughput, latency tails, costs."""
    return markdown_table(SUMMARY_HEADERS, [summary_row(s) for s in summaries], left=(0, 2))


def class_names(summaries: Sequence[StackSummary]) -> list[str]:
    """Sorted union of the SLO classes seen in `summaries`."""
    return sorted({name for s in summaries for name in s.by_class})


def format_class_table(summaries: list[StackSummary], class_name: str) -> str:
    """One row per stack for one SLO class ("-" where a stack saw none of that class)."""
    rows: list[list[str]] = []
    for s in summaries:
        c = s.by_class.get(class_name)
        if c is None:
            rows.append([s.stack, "0", MISSING, MISSING, MISSING, MISSING, MISSING])
            continue
        rows.append(
            [
                s.stack,
                str(c.requests),
                fmt_pct(c.attainment),
                fmt_num(c.ttft_p50_s),
                fmt_num(c.ttft_p99_s),
                fmt_num(c.tpot_p50_s, 1, 1000.0),
                fmt_num(c.e2e_p50_s),
            ]
        )
    return markdown_table(CLASS_HEADERS, rows)


def format_class_tables(summaries: list[StackSummary]) -> str:
    """A "### class <name>" section with `format_class_table` for every class seen."""
    sections = [
        f"### class {name}\n\n{format_class_table(summaries, name)}"
        for name in class_names(summaries)
    ]
    return "\n\n".join(sections)
