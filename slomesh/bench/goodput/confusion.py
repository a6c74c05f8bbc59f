"""The admission's confusion matrix for one rate of one system, from vLLM's detailed result.

Every offered request is one of:
- admitted and met: served, TTFT and TPOT within the objectives (vLLM's `--goodput` rule);
- admitted and missed: served late, or failed after it was let in (an error that is not a 429);
- rejected, would have met / would have missed: answered 429; which of the two is decided by
  replaying its timing through the simulator.

The replay. The served requests run again on simulated engines (`slomesh.sim.replay.replay_sim`,
the live mesh's calibrated profile, the replicas' max_num_seqs), spread over the engines in
arrival order; that gives each engine's seats over time. Each rejected request then arrives at
its own time on the engine where it would start first: it waits for a seat while all are taken
(the next seat to free), then its prefill; each output token takes the profile's decode step at
the engine's batch with it. It would have met when both fall within the objectives; it then
holds that seat, so the rejected requests after it see it (a perfect predictor admitting it
would also have had it in the way). Requests are judged in arrival order, one at a time.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shared.domain import HardwareProfile
from slomesh.bench.goodput.results import REJECTED_REASON
from slomesh.sim.replay import replay_sim, sim_engine_config
from slomesh.sim.trace import TraceRequest


@dataclass(frozen=True)
class Offered:
    """One request vLLM's benchmark sent, as its result file tells it."""

    arrival_s: float
    """Sent at, seconds after the first request."""
    input_tokens: int
    output_tokens: int
    """Tokens asked for (every request generates them all: --ignore-eos)."""
    outcome: str
    """"served", "rejected" (429) or "error"."""
    ttft_s: float = 0.0
    tpot_s: float = 0.0


@dataclass(frozen=True)
class Confusion:
    admitted_met: int
    admitted_missed: int
    rejected_would_meet: int
    rejected_would_miss: int

    @property
    def offered(self) -> int:
        return (
            self.admitted_met
            + self.admitted_missed
            + self.rejected_would_meet
            + self.rejected_would_miss
        )

    @property
    def false_rejection_share(self) -> float:
        """Rejected requests that would have met, over offered requests."""
        return self.rejected_would_meet / self.offered if self.offered else 0.0


def offered_requests(result: Mapping[str, Any], output_len: int) -> list[Offered]:
    """The requests of a vLLM result saved with `--save-detailed` (start_times included)."""
    starts = list(result.get("start_times") or [])
    if not starts:
        return []
    t0 = min(starts)
    out = []
    rows = zip(
        starts,
        result.get("input_lens", []),
        result.get("output_lens", []),
        result.get("ttfts", []),
        result.get("latencies", []),
        result.get("errors", []),
        strict=False,
    )
    for start, inp, n, ttft, latency, error in rows:
        if error:
            outcome = "rejected" if error.strip() == REJECTED_REASON else "error"
            out.append(Offered(start - t0, max(1, int(inp)), output_len, outcome))
            continue
        tpot = (latency - ttft) / (n - 1) if n > 1 else 0.0
        out.append(Offered(start - t0, max(1, int(inp)), int(n), "served", ttft, tpot))
    return out


def met(req: Offered, slo_ttft_s: float, slo_tpot_s: float) -> bool:
    """vLLM's --goodput rule: TTFT and TPOT both within their objectives."""
    return req.outcome == "served" and req.ttft_s <= slo_ttft_s and req.tpot_s <= slo_tpot_s


@dataclass
class _Engine:
    """One simulated engine's seats: the [start, end) of every request it runs."""

    seats: int
    spans: list[tuple[float, float]] = field(default_factory=list)

    def busy_at(self, t: float) -> list[float]:
        """Ends of the spans holding a seat, or waiting for one, at t (sorted)."""
        return sorted(end for start, end in self.spans if start - 1e-9 <= t < end or start > t)

    def starts_at(self, t: float) -> tuple[float, int]:
        """When a request arriving at t gets a seat, and the batch it then joins."""
        ends = self.busy_at(t)
        if len(ends) < self.seats:
            return t, len(ends) + 1
        return max(t, ends[len(ends) - self.seats]), self.seats


def _replay_served(
    served: Sequence[Offered], profile: HardwareProfile, engines: int, max_num_seqs: int
) -> list[_Engine]:
    books = [_Engine(max_num_seqs) for _ in range(engines)]
    config = sim_engine_config(max_num_seqs, 8192, 16)
    for e, book in enumerate(books):
        mine = [r for i, r in enumerate(served) if i % engines == e]
        trace = [
            TraceRequest(f"s{i}", r.arrival_s, r.input_tokens, max(1, r.output_tokens))
            for i, r in enumerate(mine)
        ]
        for t in replay_sim(trace, profile, config):
            book.spans.append((t.arrival_s + t.ttft_s, t.arrival_s + t.e2e_s))
    return books


def would_meet(
    rejected: Sequence[Offered],
    books: Sequence[_Engine],
    profile: HardwareProfile,
    slo_ttft_s: float,
    slo_tpot_s: float,
) -> list[bool]:
    """For each rejected request, in arrival order: would it have met (module docstring)."""
    out = []
    overhead = profile.submit_overhead_s + profile.delivery_overhead_s
    for r in sorted(rejected, key=lambda r: r.arrival_s):
        best: tuple[float, float, _Engine] | None = None
        for book in books:
            start, batch = book.starts_at(r.arrival_s)
            ttft = start - r.arrival_s + profile.prefill_time_s(1, r.input_tokens) + overhead
            tpot = profile.decode_time_s(r.input_tokens + r.output_tokens / 2, batch)
            if best is None or ttft < best[0]:
                best = (ttft, tpot, book)
        assert best is not None
        ttft, tpot, book = best
        ok = ttft <= slo_ttft_s and tpot <= slo_tpot_s
        if ok:
            begin = r.arrival_s + ttft
            bisect.insort(book.spans, (begin, begin + tpot * max(0, r.output_tokens - 1)))
        out.append(ok)
    return out


def confusion(
    offered: Sequence[Offered],
    profile: HardwareProfile,
    engines: int,
    max_num_seqs: int,
    slo_ttft_s: float,
    slo_tpot_s: float,
) -> Confusion:
    """The confusion matrix of one rate (module docstring)."""
    served = [r for r in offered if r.outcome == "served"]
    rejected = [r for r in offered if r.outcome == "rejected"]
    good = sum(1 for r in served if met(r, slo_ttft_s, slo_tpot_s))
    errors = sum(1 for r in offered if r.outcome == "error")
    verdicts: list[bool] = []
    if rejected:
        books = _replay_served(served, profile, max(1, engines), max_num_seqs)
        verdicts = would_meet(rejected, books, profile, slo_ttft_s, slo_tpot_s)
    yes = sum(verdicts)
    return Confusion(good, len(served) - good + errors, yes, len(rejected) - yes)
