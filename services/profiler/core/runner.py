"""Runs a sweep plan against any engine behind the small `SweepEngine` interface.

Pure: the engine adapter owns the clock (virtual time for the simulated engine, the wall clock
for vLLM), so a step's time is `now_s()` after minus before. The runner checks that each run did
what the plan says (a prefill point in one step, decode steps with every sequence decoding) and
raises `PlanNotHonoured` otherwise, instead of fitting a mislabelled time.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from services.profiler.core.sweep import DecodePoint, MixedRequest, PrefillPoint, Run, SweepPlan


@dataclass(frozen=True, slots=True)
class StepObservation:
    """What one engine step produced."""

    emitted: int
    """Sequences that got an output token in this step."""
    finished: int
    """Sequences that finished in this step."""


class SweepEngine(Protocol):
    """An engine the sweep can drive one step at a time (adapters in slomesh/profiling)."""

    def now_s(self) -> float:
        """The engine's clock, in seconds."""
        ...

    def add(self, request_id: str, input_tokens: int, max_tokens: int) -> None:
        """Queue a request of `input_tokens` prompt tokens that generates exactly max_tokens."""
        ...

    def step(self) -> StepObservation:
        """Run one engine step (schedule + execute + outputs)."""
        ...

    def has_work(self) -> bool:
        """Whether any request is still unfinished."""
        ...


class PlanNotHonoured(RuntimeError):
    """The engine did not run a point as planned (e.g. a prefill split over two steps)."""


@dataclass(frozen=True, slots=True)
class PrefillMeasurement:
    """Step times of every run of one prefill point."""

    point: PrefillPoint
    times_s: tuple[float, ...]

    @property
    def median_s(self) -> float:
        return statistics.median(self.times_s)


@dataclass(frozen=True, slots=True)
class DecodeMeasurement:
    """Decode step times of every run of one decode point (steps x repeats values)."""

    point: DecodePoint
    times_s: tuple[float, ...]

    @property
    def median_s(self) -> float:
        return statistics.median(self.times_s)


@dataclass(frozen=True, slots=True)
class MixedRunMeasurement:
    """The ε runs: all requests arrive together; each run timed from its first step to its last.

    wall_s is the median over runs_s; output_tokens and steps are those of one run.
    """

    requests: int
    output_tokens: int
    wall_s: float
    steps: int
    runs_s: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class SweepMeasurements:
    """Everything the sweep measured, per point, plus the ε run."""

    plan: SweepPlan
    prefill: tuple[PrefillMeasurement, ...]
    decode: tuple[DecodeMeasurement, ...]
    mixed: MixedRunMeasurement | None
    sweep_s: float
    """Engine-clock seconds of the timed prefill/decode runs (warm-up and ε run excluded)."""
    mixed_s: float
    """Engine-clock seconds of the ε runs (all repeats)."""


class _Runner:
    def __init__(self, engine: SweepEngine) -> None:
        self.engine = engine
        self._next_id = 0

    def _add(self, input_tokens: int, max_tokens: int) -> None:
        self._next_id += 1
        self.engine.add(f"sweep-{self._next_id}", input_tokens, max_tokens)

    def _timed_step(self) -> tuple[float, StepObservation]:
        t0 = self.engine.now_s()
        obs = self.engine.step()
        return self.engine.now_s() - t0, obs

    def _drain(self, what: str) -> None:
        if self.engine.has_work():
            raise PlanNotHonoured(f"{what}: requests left after the planned steps")

    def prefill(self, p: PrefillPoint) -> float:
        for _ in range(p.n):
            self._add(p.length, 1)
        dt, obs = self._timed_step()
        if obs.finished != p.n:
            raise PlanNotHonoured(
                f"prefill N={p.n} L={p.length}: {obs.finished} of {p.n} requests finished in "
                "the first step (raise max_num_batched_tokens / max_num_seqs so they prefill "
                "together)"
            )
        self._drain(f"prefill N={p.n} L={p.length}")
        return dt

    def decode(self, p: DecodePoint) -> list[float]:
        what = f"decode N={p.n} context={p.context}"
        for _ in range(p.n):
            self._add(p.context, p.steps + 1)
        _, obs = self._timed_step()  # the prefill of all n, which emits each one's first token
        if obs.emitted != p.n:
            raise PlanNotHonoured(f"{what}: {obs.emitted} of {p.n} prompts prefilled in one step")
        times = []
        for k in range(1, p.steps + 1):
            dt, obs = self._timed_step()
            if obs.emitted != p.n:
                raise PlanNotHonoured(
                    f"{what}: decode step {k} gave {obs.emitted} tokens, expected {p.n} "
                    "(a preemption or a split batch)"
                )
            times.append(dt)
        self._drain(what)
        return times

    def run(self, run: Run) -> list[float]:
        kind, point = run
        if kind == "prefill":
            assert isinstance(point, PrefillPoint)
            return [self.prefill(point)]
        assert isinstance(point, DecodePoint)
        return self.decode(point)

    def mixed(self, requests: tuple[MixedRequest, ...], repeats: int) -> MixedRunMeasurement:
        runs = []
        for _ in range(repeats):
            for r in requests:
                self._add(r.input_tokens, r.output_tokens)
            t0 = self.engine.now_s()
            tokens = steps = 0
            while self.engine.has_work():
                tokens += self.engine.step().emitted
                steps += 1
            runs.append(self.engine.now_s() - t0)
        return MixedRunMeasurement(
            len(requests), tokens, statistics.median(runs), steps, tuple(runs)
        )


def run_sweep(
    engine: SweepEngine, plan: SweepPlan, progress: Callable[[str], None] | None = None
) -> SweepMeasurements:
    """Run the plan's warm-up, its timed runs in order, then the ε run (if it has requests)."""
    runner = _Runner(engine)
    for run in plan.warmup:
        runner.run(run)
    prefill: dict[PrefillPoint, list[float]] = {p: [] for p in plan.prefill}
    decode: dict[DecodePoint, list[float]] = {p: [] for p in plan.decode}
    t0 = engine.now_s()
    for i, run in enumerate(plan.runs):
        times = runner.run(run)
        kind, point = run
        if kind == "prefill":
            assert isinstance(point, PrefillPoint)
            prefill[point] += times
        else:
            assert isinstance(point, DecodePoint)
            decode[point] += times
        quarter = max(1, len(plan.runs) // 4)
        if progress is not None and ((i + 1) % quarter == 0 or i + 1 == len(plan.runs)):
            progress(f"sweep: {i + 1}/{len(plan.runs)} runs")
    sweep_s = engine.now_s() - t0
    mixed = runner.mixed(plan.mixed, plan.mixed_repeats) if plan.mixed else None
    return SweepMeasurements(
        plan=plan,
        prefill=tuple(PrefillMeasurement(p, tuple(t)) for p, t in prefill.items()),
        decode=tuple(DecodeMeasurement(p, tuple(t)) for p, t in decode.items()),
        mixed=mixed,
        sweep_s=sweep_s,
        mixed_s=sum(mixed.runs_s) if mixed is not None else 0.0,
    )
