"""One rate of one system, read from vLLM's detailed benchmark result, and the printed table.

vLLM's figures are taken as they are: `request_goodput` (requests that met every `--goodput`
objective per second of the run), `completed`, the TTFT/TPOT percentiles. What vLLM does not
split is counted from its per-request `errors`: a 429 (the reason `Too Many Requests`) is a
rejection, any other failure an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from shared.report.table import fmt_num, markdown_table

BURST_TPOT_S = 0.0005
"""Below this mean time per token after the first (0.5 ms; the tiny model's engine decodes at
1-5 ms per token) an answer arrived as one burst."""

REJECTED_REASON = "Too Many Requests"
"""What vLLM's client records as a request's error for an HTTP 429 (aiohttp's reason)."""


@dataclass(frozen=True)
class Step:
    """One rate of one system."""

    system: str
    rate_rps: float
    """Offered load: the Poisson arrival rate, requests/s."""
    offered: int
    """Requests sent."""
    served: int
    """Requests answered completely (vLLM's `completed`)."""
    rejected: int
    """Requests answered 429."""
    errors: int
    """Other failed requests (5xx, connection errors)."""
    met: int
    """Served requests that met every objective of `--goodput`."""
    goodput_rps: float
    """vLLM's request goodput: `met` per second of the run."""
    duration_s: float
    """The run, first request sent to last answer, s."""
    ttft_p50_ms: float
    ttft_p99_ms: float
    tpot_p50_ms: float
    tpot_p99_ms: float
    bursts: int = 0
    """Served requests whose tokens after the first all came within BURST_TPOT_S per token of
    it: the answer was held back somewhere between the engine and the client's reads (the
    client's own event loop included) and read at once, not as generated."""

    @property
    def met_of_served(self) -> float | None:
        """The fraction of served requests that met the SLO (None when none was served)."""
        return self.met / self.served if self.served else None


def step_from_result(system: str, rate: float, result: Mapping[str, Any]) -> Step:
    """A `Step` from vLLM's result (saved with `--save-detailed`: it carries `errors`)."""
    errors = [e for e in result.get("errors", []) if e]
    rejected = sum(1 for e in errors if e.strip() == REJECTED_REASON)
    served = int(result["completed"])
    offered = len(result["errors"]) if "errors" in result else int(result.get("num_prompts", 0))
    duration = float(result["duration"])
    goodput = float(result.get("request_goodput") or 0.0)
    return Step(
        system=system,
        rate_rps=rate,
        offered=offered,
        served=served,
        rejected=rejected,
        errors=len(errors) - rejected,
        met=min(served, round(goodput * duration)),
        goodput_rps=goodput,
        duration_s=duration,
        ttft_p50_ms=float(result.get("median_ttft_ms", 0.0)),
        ttft_p99_ms=float(result.get("p99_ttft_ms", 0.0)),
        tpot_p50_ms=float(result.get("median_tpot_ms", 0.0)),
        tpot_p99_ms=float(result.get("p99_tpot_ms", 0.0)),
        bursts=count_bursts(result),
    )


def count_bursts(result: Mapping[str, Any]) -> int:
    """Served requests of more than one token delivered as one burst (see `Step.bursts`)."""
    rows = zip(
        result.get("ttfts", []),
        result.get("latencies", []),
        result.get("output_lens", []),
        strict=False,
    )
    return sum(
        1 for ttft, latency, n in rows if n > 1 and (latency - ttft) / (n - 1) < BURST_TPOT_S
    )


def step_json(step: Step) -> dict[str, Any]:
    return {**asdict(step), "met_of_served": step.met_of_served}


def step_of_json(data: Mapping[str, Any]) -> Step:
    fields = Step.__dataclass_fields__
    return Step(**{k: v for k, v in data.items() if k in fields})


HEADERS = (
    "system",
    "rate req/s",
    "goodput req/s",
    "x bare",
    "offered",
    "served",
    "rejected (429)",
    "errors",
    "met/served %",
    "TTFT p50 ms",
    "TTFT p99 ms",
    "TPOT p50 ms",
    "TPOT p99 ms",
    "bursts",
)


def _baseline(steps: Sequence[Step], baseline: str) -> dict[float, float]:
    return {s.rate_rps: s.goodput_rps for s in steps if s.system == baseline}


def table_rows(steps: Sequence[Step], baseline: str = "bare-vllm") -> list[list[str]]:
    """One row per system and rate, ordered by rate then system as given; `x bare` is the
    goodput over the baseline system's at the same rate."""
    base = _baseline(steps, baseline)
    order = {name: i for i, name in enumerate(dict.fromkeys(s.system for s in steps))}
    rows = []
    for s in sorted(steps, key=lambda s: (s.rate_rps, order[s.system])):
        ref = base.get(s.rate_rps)
        ratio = s.goodput_rps / ref if ref else None
        share = s.met_of_served
        rows.append(
            [
                s.system,
                f"{s.rate_rps:g}",
                fmt_num(s.goodput_rps, 1),
                fmt_num(ratio, 2),
                str(s.offered),
                str(s.served),
                str(s.rejected),
                str(s.errors),
                fmt_num(share, 0, 100.0),
                fmt_num(s.ttft_p50_ms, 0),
                fmt_num(s.ttft_p99_ms, 0),
                fmt_num(s.tpot_p50_ms, 1),
                fmt_num(s.tpot_p99_ms, 1),
                str(s.bursts),
            ]
        )
    return rows


def format_table(steps: Sequence[Step], baseline: str = "bare-vllm") -> str:
    return markdown_table(HEADERS, table_rows(steps, baseline))
