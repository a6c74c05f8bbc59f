"""Admission on what the mesh delivers now: predict a request's TTFT and TPOT from the times this
ingress replica's own streams measured, at about the same load, in the last few seconds, and
from the seats its streams hold.

Why here. The times an ingress measures on its streams are what a client sees, less the network:
the engines' steps under the current load, their CPU contention with the control plane, the
scheduler's queue, the replica and relay hops. A profile taken with the engine alone (what the
scheduler plans with) sees none of the control plane's cost, so on a busy machine it admits
requests that then miss.

The model. Per model served, `n` is the requests this ingress has let in and not yet finished
(admission, queue, stream). Each stream leaves two samples keyed by the `n` it was let in at: its
time to first token (recorded at the first token) and its time per output token after the first
(recorded at its end). For a new request, let in at load `m = n + 1`:

    TTFT^ = the largest of
      - the `quantile` of the TTFT samples of loads in [m - w, m + w] (w = max(1, m·`band`))
        whose TTFT objective is no looser than the request's;
      - the wait of the oldest request of such an objective still without its first token;
      - with `seat_wait`, while a request of such an objective has waited `queued_after_s` for
        its first token (the seats are full), the wait for a seat in the engines' batch
        (`seat_wait.py`) plus the quickest first token measured: the streams running now free
        their seats at their first token + their tokens x the median delivered TPOT, the
        requests of such objectives waiting ahead take the first seats that free, and the seats
        are the `seat_quantile` of the streams running here at each first token of the window
        (at least those running now). A request's tokens are its max_tokens, at most the 0.9
        quantile of the output lengths of the streams that ended in the window (most answers
        stop well before max_tokens);
    TPOT^ = the `quantile` of the TPOT samples of the same loads

The seat wait is what the load-keyed samples cannot see: under overload the samples at a load
were taken while the queue was shorter, and a first token comes a second or more after the
admission it should have stopped.

A looser objective's samples never stand in for a tighter request's: they would shut a tight
class out for good once its own samples aged out (no admission, no new sample; the loose
class's first tokens, taken behind a queue the tight class may pass on an EDF engine, keep the
prediction up). Without samples of its objective or a tighter one, the waits and the seat wait
above are its prediction (none: let in).

Only streamed requests leave samples or count as awaiting their first token: a request answered
whole shows its first token with its last (it holds a seat from its admission). A request that
would run alone (at most `alone_in_flight` others in flight) is always let in: no admission
choice can serve it sooner. With fewer than `min_samples` samples near m, the nearest lower loads
stand in (latency does not fall as load grows); with none at all the request is let in. A
request whose TTFT^ or TPOT^ is beyond its objective times `margin` is answered 429 at once, with
Retry-After = the predicted excess (at least `min_retry_after_s`). Samples older than `window_s`
are forgotten: a load judged too high is tried again once its samples are gone, so the limit
follows the machine as its other tenants come and go. Every objective counts the time the
request spent here before admission, and the delay the ingress's event loop runs with now
(`loop_lag_s` of `check`: the request's admission and first chunk each wait about that long).

Pure logic: the caller passes the clock (seconds, monotonic).
"""

from __future__ import annotations

import math
import re
import statistics
from collections import deque
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from services.ingress.core.seat_wait import seat_wait_s


class DeliveredGuardConfig(BaseModel):
    """The ingress's admission on delivered latency (`delivered_guard` of the ingress's args)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    enabled: bool = True
    """Reject at once a request predicted to miss its TTFT or TPOT objective."""
    window_s: float = Field(6.0, gt=0)
    """Samples older than this many seconds are forgotten."""
    quantile: float = Field(0.9, gt=0, le=1)
    """The quantile of the samples near the load that is the prediction."""
    band: float = Field(0.1, ge=0, le=1)
    """Samples of loads within this fraction of the load (at least 1 request) count as near."""
    min_samples: int = Field(4, ge=1)
    """Fewer samples than this near the load: the nearest lower loads' samples are added."""
    alone_in_flight: int = Field(0, ge=0)
    """With at most this many other requests in flight here, a request is let in whatever the
    prediction: one that would run (nearly) alone cannot be served sooner by turning it away."""
    seat_wait: bool = True
    """Also predict the wait for a seat in the engines' running batch from this ingress's own
    streams (the module docstring)."""
    queued_after_s: float = Field(0.1, ge=0)
    """The seat wait is predicted only while a request ahead has waited this long for its first
    token: the seats are full (a prefill alone takes far less), not just busy."""
    seat_quantile: float = Field(0.5, gt=0, le=1)
    """The seats are this quantile of the streams running here at each first token of the
    window (the median: with several ingress replicas this one's share of the engines' seats
    moves around it, and the most seen at once would overstate it)."""
    margin: float = Field(0.9, gt=0, le=2)
    """A prediction beyond objective x margin is a rejection (below 1: under overload the
    requests let in are those predicted just within their objective, and a prediction a few
    percent short would make each a miss; the seat it would take goes to a later request)."""
    min_retry_after_s: float = Field(1.0, ge=0)
    """Smallest Retry-After of a rejection, seconds."""
    max_retry_after_s: float = Field(30.0, gt=0)
    """Largest Retry-After of a rejection, seconds."""
    max_samples: int = Field(4096, ge=16)
    """Samples kept per model at most (the oldest go first)."""
    stale_after_s: float = Field(120.0, gt=0)
    """A request let in that has had no first token for this long, and for twice its TTFT
    objective, is no longer counted (a stream that never started leaves no end)."""


@dataclass(frozen=True, slots=True)
class Sample:
    at_s: float
    load: int
    value_s: float
    ttft_slo_s: float


@dataclass(slots=True)
class Ticket:
    """One request let in: when, at which load, its objective, its first token."""

    model: str
    load: int
    start_s: float
    ttft_slo_s: float
    first_s: float | None = None
    streamed: bool = True
    output_tokens: int = 0
    """Tokens it may generate (its max_tokens; 0: not known)."""
    """Its tokens reach the client as they come (False: in one answer at the end, so its
    "first token" is its last and says nothing of TTFT or TPOT)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    admit: bool
    ttft_s: float | None
    tpot_s: float | None
    load: int
    reason: str = ""
    retry_after_s: float = 0.0


@dataclass
class _ModelBook:
    in_flight: int = 0
    streaming: int = 0
    """Streamed requests with their first token out and no end yet."""
    peaks: deque[tuple[float, int]] = field(default_factory=deque)
    """(when, `streaming` then) at every first token."""
    lengths: deque[tuple[float, int]] = field(default_factory=deque)
    """(when, output tokens) of every stream that ended."""
    ttft: deque[Sample] = field(default_factory=deque)
    tpot: deque[Sample] = field(default_factory=deque)
    last_tpot_s: float | None = None
    """The median TPOT of the window when it last had samples (a burst after a quiet spell
    finds the window empty)."""


LOOP_DELAY = "the ingress loop's delay"
"""How a rejection's reason names the event-loop delay it counted (`loop_delay_of` reads it)."""
_LOOP_DELAY_RE = re.compile(r"\(([0-9.]+) s of it " + re.escape(LOOP_DELAY) + r"\)")


def loop_delay_of(reason: str) -> float | None:
    """The ingress loop's delay a delivered-guard rejection's reason names (None: it names
    none: not such a rejection, or the loop ran on time)."""
    m = _LOOP_DELAY_RE.search(reason)
    return float(m.group(1)) if m else None


def quantile(values: list[float], q: float) -> float:
    """The q-quantile of `values` (nearest rank; values need not be sorted)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


class DeliveredGuard:
    def __init__(self, config: DeliveredGuardConfig | None = None) -> None:
        self.cfg = config if config is not None else DeliveredGuardConfig()
        self._books: dict[str, _ModelBook] = {}
        self._tickets: dict[str, Ticket] = {}
        self.rejected = 0

    def in_flight(self, model: str) -> int:
        book = self._books.get(model)
        return book.in_flight if book else 0

    def predict(
        self, model: str, ttft_slo_s: float, now_s: float
    ) -> tuple[float | None, float | None, int]:
        """(TTFT^, TPOT^, m) for a request of `model` let in now (module docstring)."""
        book = self._books.setdefault(model, _ModelBook())
        self._forget(book, now_s)
        self._drop_stale(now_s)
        load = book.in_flight + 1
        ttft = self._near([s for s in book.ttft if s.ttft_slo_s <= ttft_slo_s], load)
        waits = [
            now_s - t.start_s
            for t in self._tickets.values()
            if t.model == model and t.streamed and t.first_s is None and t.ttft_slo_s <= ttft_slo_s
        ]
        if waits:
            ttft = max(ttft or 0.0, max(waits))
        if self.cfg.seat_wait:
            seat = self._seat_wait(book, model, ttft_slo_s, now_s)
            if seat is not None:
                ttft = max(ttft or 0.0, seat)
        return ttft, self._near(list(book.tpot), load), load

    def _seat_wait(
        self, book: _ModelBook, model: str, ttft_slo_s: float, now_s: float
    ) -> float | None:
        """The seat wait of the module docstring plus the quickest first token; None while no
        request waits ahead longer than `queued_after_s`, or without a measured TPOT."""
        if book.tpot:
            book.last_tpot_s = statistics.median(s.value_s for s in book.tpot)
        mine = [t for t in self._tickets.values() if t.model == model]  # in admission order
        ahead = [t for t in mine if t.streamed and t.first_s is None and t.ttft_slo_s <= ttft_slo_s]
        if not ahead or now_s - ahead[0].start_s < self.cfg.queued_after_s:
            return None
        if book.last_tpot_s is None or not book.peaks:
            return None
        tpot = book.last_tpot_s
        quickest = min((s.value_s for s in book.ttft), default=0.0)
        ended = [float(n) for _, n in book.lengths]
        cap = quantile(ended, 0.9) if len(ended) >= self.cfg.min_samples else math.inf
        asked = [t.output_tokens for t in mine if t.output_tokens > 0]
        usual = min(statistics.median(asked), cap) if asked else (cap if ended else 0.0)

        def hold_s(t: Ticket) -> float:
            return max(0.0, min(t.output_tokens or usual, cap) - 1) * tpot

        running = [
            (t.first_s if t.first_s is not None else t.start_s) + hold_s(t) - now_s
            for t in mine
            if t.first_s is not None or not t.streamed
        ]
        seats = round(quantile([float(n) for _, n in book.peaks], self.cfg.seat_quantile))
        return seat_wait_s(running, [hold_s(t) for t in ahead], seats) + quickest

    def check(
        self,
        model: str,
        ttft_slo_s: float,
        tpot_slo_s: float | None,
        waited_s: float,
        now_s: float,
        loop_lag_s: float = 0.0,
    ) -> Verdict:
        """Whether a request with these objectives may be let in now; `waited_s` is the time it
        already spent before admission. `loop_lag_s` is how late the ingress's event loop runs
        now: the request's admission and its first chunk will each wait about that long there,
        so it counts as time already spent too (the live ingress measures it, the simulator is
        given the figure measured live); a rejection names it."""
        ttft, tpot, load = self.predict(model, ttft_slo_s, now_s)
        if not self.cfg.enabled or load - 1 <= self.cfg.alone_in_flight:
            return Verdict(True, ttft, tpot, load)
        bound = self.cfg.margin
        spent = waited_s + loop_lag_s
        if ttft is not None and spent + ttft > ttft_slo_s * bound:
            excess = spent + ttft - ttft_slo_s * bound
            lag = f" ({loop_lag_s:.3f} s of it {LOOP_DELAY})" if loop_lag_s > 0 else ""
            return self._reject(
                ttft,
                tpot,
                load,
                excess,
                f"predicted TTFT {spent + ttft:.3f} s{lag} at {load} requests in flight "
                f"(measured on this mesh in the last {self.cfg.window_s:g} s) exceeds the TTFT "
                f"objective of {ttft_slo_s:g} s",
            )
        if tpot is not None and tpot_slo_s is not None and tpot > tpot_slo_s * bound:
            return self._reject(
                ttft,
                tpot,
                load,
                0.0,
                f"predicted time per output token {tpot * 1e3:.1f} ms at {load} requests in "
                f"flight (measured on this mesh in the last {self.cfg.window_s:g} s) exceeds "
                f"the TPOT objective of {tpot_slo_s * 1e3:g} ms",
            )
        return Verdict(True, ttft, tpot, load)

    def start(
        self,
        request_id: str,
        model: str,
        ttft_slo_s: float,
        now_s: float,
        streamed: bool = True,
        output_tokens: int = 0,
    ) -> None:
        """A request was let in (`check` admitted it); `streamed` and `output_tokens`: see
        `Ticket`. A request answered whole counts in flight but leaves no samples."""
        book = self._books.setdefault(model, _ModelBook())
        book.in_flight += 1
        self._tickets[request_id] = Ticket(
            model, book.in_flight, now_s, ttft_slo_s, None, streamed, output_tokens
        )

    def first_token(self, request_id: str, now_s: float) -> None:
        """Its first token went out: a TTFT sample (from when it was let in)."""
        t = self._tickets.get(request_id)
        if t is None or t.first_s is not None:
            return
        t.first_s = now_s
        if t.streamed:
            book = self._books[t.model]
            self._add(book.ttft, Sample(now_s, t.load, now_s - t.start_s, t.ttft_slo_s))
            book.streaming += 1
            book.peaks.append((now_s, book.streaming))
            while len(book.peaks) > self.cfg.max_samples:
                book.peaks.popleft()

    def end(self, request_id: str, output_tokens: int, now_s: float) -> None:
        """It ended (finished, failed or left): a TPOT sample when it streamed 2+ tokens."""
        t = self._tickets.pop(request_id, None)
        if t is None:
            return
        book = self._books[t.model]
        book.in_flight = max(0, book.in_flight - 1)
        if t.streamed and t.first_s is not None:
            book.streaming = max(0, book.streaming - 1)
        if t.streamed and t.first_s is not None and output_tokens > 0:
            book.lengths.append((now_s, output_tokens))
            while len(book.lengths) > self.cfg.max_samples:
                book.lengths.popleft()
        if t.streamed and t.first_s is not None and output_tokens > 1:
            tpot = (now_s - t.first_s) / (output_tokens - 1)
            self._add(book.tpot, Sample(now_s, t.load, tpot, t.ttft_slo_s))

    def _reject(
        self, ttft: float | None, tpot: float | None, load: int, excess_s: float, reason: str
    ) -> Verdict:
        self.rejected += 1
        retry = min(max(excess_s, self.cfg.min_retry_after_s), self.cfg.max_retry_after_s)
        return Verdict(False, ttft, tpot, load, reason, retry)

    def _add(self, samples: deque[Sample], sample: Sample) -> None:
        samples.append(sample)
        while len(samples) > self.cfg.max_samples:
            samples.popleft()

    def _forget(self, book: _ModelBook, now_s: float) -> None:
        horizon = now_s - self.cfg.window_s
        for samples in (book.ttft, book.tpot):
            while samples and samples[0].at_s < horizon:
                samples.popleft()
        for pairs in (book.peaks, book.lengths):
            while pairs and pairs[0][0] < horizon:
                pairs.popleft()

    def _drop_stale(self, now_s: float) -> None:
        stale = [
            rid
            for rid, t in self._tickets.items()
            if t.first_s is None
            and now_s - t.start_s > max(self.cfg.stale_after_s, 2 * t.ttft_slo_s)
        ]
        for rid in stale:
            self.end(rid, 0, now_s)

    def _near(self, samples: list[Sample], load: int) -> float | None:
        """The quantile of the samples near `load`, topped up from the nearest lower loads."""
        if not samples:
            return None
        width = max(1, round(load * self.cfg.band))
        near = [s.value_s for s in samples if abs(s.load - load) <= width]
        if len(near) < self.cfg.min_samples:
            lower = sorted((s for s in samples if s.load < load - width), key=lambda s: -s.load)
            near += [s.value_s for s in lower[: self.cfg.min_samples - len(near)]]
        if not near:
            return None
        return quantile(near, self.cfg.quantile)
