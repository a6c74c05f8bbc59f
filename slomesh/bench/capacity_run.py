"""Running capacity searches on a scenario: one search per (stack, seed), median over seeds.

What makes a 3-seed, 3-stack search take minutes rather than hours:
- Fewer requests per probe: min(scenario requests, PROBE_REQUESTS = 1000) unless --requests or
  the scenario (capacity_probe_requests) says
  otherwise. A shorter run builds a shorter queue past capacity, so capacities from short probes
  lean high; every stack gets the same rule, so ratios between stacks hold up better than
  absolute figures.
- Probes sized by duration where the count is not enough: a scenario with
  capacity_probe_deadlines = k makes every probe's arrivals last at least k times its longest
  TTFT deadline (probe_requests_at: the count, or rate * k * deadline when that is more).
  Otherwise a probe at a high rate arrives entirely within a long deadline, the queue never
  reaches steady state and the search measures the burst a stack can absorb, not a rate it
  can sustain (with no upper end: every rate "attains").
- Early stop with no approximation: a probe stops as soon as the verdict is certain
  (early_stop.py; a miss counts at the request's TTFT deadline once it has no first token by
  then). Past capacity misses pile up early, so missed probes are the cheap ones.
- Two capacities per (stack, seed): `overall` (attainment over all requests >= target) and
  `every-class` (every SLO class >= target, so giving up a small class does not pay), searched
  one after the other in one worker; the overall search takes every rate at which every class
  attained without probing it again (`search_seed`).
- Bisection to 5% (about 7 probes per search), and up to 2 worker processes
  (ProcessPoolExecutor) over the (stack, seed) pairs.

What a probe costs: its simulated time (requests / rate), so probes far below capacity are the
dear ones, times the stack's work per simulated second. A stack with QLM's global scheduler
(`qlm`, the flagship) re-plans with its ILP up to once per simulated second while a violation is
predicted (replan_min_interval_s), about 0.1 s of CPU per solve, nearly all of it inside HiGHS
at the root node (cut rounds, then the sub-MIP that finds the first improving plan; building
the model is under a tenth): one flagship probe on qlm-wc at 3 r/s (1,000 requests, about 330
simulated seconds) makes 338 solves, 90% of its CPU. Start such a stack's search near its
capacity (--rate) rather than at the scenario's default rate far below it.

Every probe at one seed regenerates the workload at the probed rate from that seed. In the
simulator `qlm`'s global solver runs under work limits, not a wall-clock limit
(StackConfig.global_policy), so its probes are reproducible from the seed.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from math import ceil

from shared.metrics.summary import summarize
from shared.workloads import WorkloadSpec, generate, get_slo_class
from slomesh.bench.capacity import CapacitySearch, CapacitySettings, search_capacity
from slomesh.bench.early_stop import Criterion, Decided, EarlyStopSimulator
from slomesh.bench.scenarios import ScenarioSpec
from slomesh.stacks import STACKS

PROBE_REQUESTS = 1000


def probe_requests(sc: ScenarioSpec, settings: CapacitySettings) -> int:
    """Requests per probe: the setting, else the scenario's capacity_probe_requests, else
    min(scenario requests, PROBE_REQUESTS)."""
    return (
        settings.probe_requests
        or sc.capacity_probe_requests
        or min(sc.workload.requests, PROBE_REQUESTS)
    )


def longest_ttft_deadline_s(workload: WorkloadSpec) -> float:
    """The longest TTFT deadline of the workload's streams (a stream's own, else its class's)."""
    return max(
        s.ttft_deadline_s or get_slo_class(s.slo_class).ttft_deadline_s for s in workload.streams
    )


def probe_min_duration_s(sc: ScenarioSpec) -> float | None:
    """How long every probe's arrivals last at least, seconds (None: sized by count only)."""
    if sc.capacity_probe_deadlines is None:
        return None
    return sc.capacity_probe_deadlines * longest_ttft_deadline_s(sc.workload)


def probe_requests_at(sc: ScenarioSpec, settings: CapacitySettings, rate_rps: float) -> int:
    """Requests of a probe at `rate_rps`: the count (probe_requests), or more where the
    scenario's minimum duration (probe_min_duration_s) needs more at that rate."""
    count = probe_requests(sc, settings)
    duration_s = probe_min_duration_s(sc)
    return count if duration_s is None else max(count, ceil(rate_rps * duration_s))


def make_probe(
    sc: ScenarioSpec,
    stack: str,
    seed: int,
    settings: CapacitySettings,
    criterion: Criterion = "overall",
) -> Callable[[float], float]:
    """probe(rate) -> the criterion's attainment (a bound when stopped early) of `stack` at
    `rate` r/s over probe_requests_at(rate) requests: overall attainment, or the lowest class
    attainment."""

    def probe(rate: float) -> float:
        n = probe_requests_at(sc, settings, rate)
        workload = sc.workload.model_copy(update={"requests": n})
        requests = generate(workload.with_total_rate(rate), seed)
        sim = EarlyStopSimulator(
            sc.cluster, STACKS.create(stack), requests, settings.target, criterion
        )
        try:
            summary = summarize(sim.run())
        except Decided as d:
            return d.attainment
        if criterion == "overall":
            return summary.slo_attainment
        return min(summary.attainment_by_class.values(), default=summary.slo_attainment)

    return probe


def search_seed(
    sc: ScenarioSpec, stack: str, seed: int, settings: CapacitySettings, start_rps: float
) -> dict[Criterion, CapacitySearch]:
    """The capacity searches of one (stack, seed), in a worker process: every-class first (when
    `settings.every_class`), then overall.

    A rate at which every class attained the target attained it overall too (overall attainment
    is a mean of the class attainments; early stop is exact, so a verdict is the full run's), so
    the overall search takes that verdict without probing, and records the every-class figure, a
    lower bound of the overall one. Those are the dear probes (a passing probe runs nearly to its
    end, and the ones below capacity last longest); the capacities are those of two separate
    searches."""
    found: dict[Criterion, CapacitySearch] = {}
    passed: dict[float, float] = {}
    if settings.every_class:
        every = _search(make_probe(sc, stack, seed, settings, "every-class"), start_rps, settings)
        found["every-class"] = every
        passed = {rate: att for rate, att in every.probes if att >= settings.target}
    overall = make_probe(sc, stack, seed, settings, "overall")
    found["overall"] = _search(
        lambda rate: passed[rate] if rate in passed else overall(rate), start_rps, settings
    )
    return found


def _search(
    probe: Callable[[float], float], start_rps: float, settings: CapacitySettings
) -> CapacitySearch:
    return search_capacity(
        probe,
        start_rps,
        settings.target,
        rel_tol=settings.rel_tol,
        max_steps=settings.max_steps,
        bracket=settings.bracket,
    )


@dataclass(frozen=True, slots=True)
class PolicyCapacity:
    """One stack's searches by seed and their median."""

    stack: str
    by_seed: dict[int, CapacitySearch]
    """The overall capacity's searches (attainment over all requests >= target)."""
    every_class_by_seed: dict[int, CapacitySearch] = field(default_factory=dict)
    """The every-class capacity's searches (each SLO class >= target); empty: not searched."""

    @property
    def capacity_rps(self) -> float:
        return float(statistics.median(s.capacity_rps for s in self.by_seed.values()))

    @property
    def every_class_rps(self) -> float | None:
        found = self.every_class_by_seed.values()
        return float(statistics.median(s.capacity_rps for s in found)) if found else None

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "stack": self.stack,
            "capacity_rps": _round(self.capacity_rps),
            "capacity_rps_by_seed": {
                str(k): _round(s.capacity_rps) for k, s in self.by_seed.items()
            },
            "search_by_seed": {str(k): _search_json(s) for k, s in self.by_seed.items()},
        }
        if self.every_class_by_seed:
            out["capacity_every_class_rps"] = _round(self.every_class_rps)
            out["capacity_every_class_rps_by_seed"] = {
                str(k): _round(s.capacity_rps) for k, s in self.every_class_by_seed.items()
            }
            out["search_every_class_by_seed"] = {
                str(k): _search_json(s) for k, s in self.every_class_by_seed.items()
            }
        return out


def _round(x: float | None) -> float | None:
    return None if x is None else float(f"{x:.4g}")


def _search_json(s: CapacitySearch) -> dict[str, object]:
    return {
        "bracket_rps": [_round(s.lo_rps), _round(s.hi_rps)],
        "iterations": s.iterations,
        "probes": [[_round(r), round(a, 4)] for r, a in s.probes],
    }


def run_capacity(
    sc: ScenarioSpec,
    stacks: Sequence[str],
    settings: CapacitySettings,
    start_rps: float | None = None,
    log: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
) -> list[PolicyCapacity]:
    """Search every (stack, seed), both criteria in one worker (`search_seed`), up to
    `settings.workers` at a time."""
    start = start_rps or sc.default_rate_rps
    jobs = [(p, s) for p in stacks for s in settings.seeds]
    results: dict[tuple[str, int, Criterion], CapacitySearch] = {}

    def collect(p: str, s: int, found: dict[Criterion, CapacitySearch]) -> None:
        for c, search in found.items():
            results[p, s, c] = search
            log(_line(p, s, c, search))

    if settings.workers == 1 or len(jobs) == 1:
        for p, s in jobs:
            collect(p, s, search_seed(sc, p, s, settings, start))
    else:
        with ProcessPoolExecutor(max_workers=settings.workers) as pool:
            futures: dict[tuple[str, int], Future[dict[Criterion, CapacitySearch]]] = {
                (p, s): pool.submit(search_seed, sc, p, s, settings, start) for p, s in jobs
            }
            for (p, s), fut in futures.items():
                collect(p, s, fut.result())
    return [
        PolicyCapacity(
            p,
            {s: results[p, s, "overall"] for s in settings.seeds},
            {
                s: results[p, s, "every-class"]
                for s in settings.seeds
                if (p, s, "every-class") in results
            },
        )
        for p in stacks
    ]


def _line(stack: str, seed: int, criterion: Criterion, s: CapacitySearch) -> str:
    return (
        f"capacity {stack} seed {seed} {criterion}: {s.capacity_rps:.3g} r/s "
        f"(bracket {s.lo_rps}..{s.hi_rps}, {s.iterations} probes)"
    )
