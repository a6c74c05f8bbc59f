"""Running capacity searches on a scenario: one search per (policy, seed), median over seeds.

What makes a 3-seed, 3-policy search take minutes rather than hours:
- Fewer requests per probe: min(scenario requests, PROBE_REQUESTS = 1000) unless --requests or
  the scenario (capacity_probe_requests) says
  otherwise. A shorter run builds a shorter queue past capacity, so capacities from short probes
  lean high; every policy gets the same rule, so ratios between policies hold up better than
  absolute figures.
- Early stop with no approximation: a probe stops as soon as the verdict is certain, i.e. when
  ceil(target x N) requests have met their SLO (attained) or more than N minus that have missed
  (missed). Past capacity misses pile up early, so missed probes are the cheap ones.
- Bisection to 5% (about 7 probes per search), and up to 2 worker processes
  (ProcessPoolExecutor) over the (policy, seed) pairs.

Every probe at one seed regenerates the workload at the probed rate from that seed. `qlm`'s global
solver runs under a wall-clock time limit, so its probes, and hence its capacities, are not
bit-reproducible from the seed.
"""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass

from shared.domain import Request
from shared.metrics.records import RequestRecord
from shared.metrics.summary import summarize
from shared.workloads import generate
from slomesh.bench.capacity import CapacitySearch, CapacitySettings, search_capacity
from slomesh.bench.scenarios import ScenarioSpec
from slomesh.sim.cluster import ClusterSpec
from slomesh.sim.simulator import Simulator
from slomesh.stacks import STACKS, StackConfig

PROBE_REQUESTS = 1000


class _Decided(Exception):
    """Raised out of the event loop once a probe's verdict is certain."""

    def __init__(self, attainment: float) -> None:
        super().__init__(attainment)
        self.attainment = attainment


class _EarlyStopSimulator(Simulator):
    """A Simulator that stops once attainment >= target is certain either way.

    The attainment it reports is then a bound: met / N when attained, 1 - missed / N when missed.
    """

    def __init__(
        self, cluster: ClusterSpec, stack: StackConfig, requests: Sequence[Request], target: float
    ) -> None:
        super().__init__(cluster, stack, requests)
        n = len(self.requests)
        self._n = n
        self._need = math.ceil(target * n - 1e-9)
        self._met = 0
        self._missed = 0

    def _add_record(self, rec: RequestRecord) -> None:
        super()._add_record(rec)
        if rec.slo_met:
            self._met += 1
            if self._met >= self._need:
                raise _Decided(self._met / self._n)
        else:
            self._missed += 1
            if self._missed > self._n - self._need:
                raise _Decided(1.0 - self._missed / self._n)


def probe_requests(sc: ScenarioSpec, settings: CapacitySettings) -> int:
    """Requests per probe: the setting, else the scenario's capacity_probe_requests, else
    min(scenario requests, PROBE_REQUESTS)."""
    return (
        settings.probe_requests
        or sc.capacity_probe_requests
        or min(sc.workload.requests, PROBE_REQUESTS)
    )


def make_probe(
    sc: ScenarioSpec, policy: str, seed: int, settings: CapacitySettings
) -> Callable[[float], float]:
    """probe(rate) -> attainment (a bound when stopped early) of `policy` at `rate` r/s."""
    workload = sc.workload.model_copy(update={"requests": probe_requests(sc, settings)})

    def probe(rate: float) -> float:
        requests = generate(workload.with_total_rate(rate), seed)
        sim = _EarlyStopSimulator(
            sc.cluster, STACKS.create(policy), requests, target=settings.target
        )
        try:
            return summarize(sim.run()).slo_attainment
        except _Decided as d:
            return d.attainment

    return probe


def search_one(
    sc: ScenarioSpec, policy: str, seed: int, settings: CapacitySettings, start_rps: float
) -> CapacitySearch:
    """The capacity search of one (policy, seed) pair (runs in a worker process)."""
    return search_capacity(
        make_probe(sc, policy, seed, settings),
        start_rps,
        settings.target,
        rel_tol=settings.rel_tol,
        max_steps=settings.max_steps,
        bracket=settings.bracket,
    )


@dataclass(frozen=True, slots=True)
class PolicyCapacity:
    """One policy's searches by seed and their median."""

    policy: str
    by_seed: dict[int, CapacitySearch]

    @property
    def capacity_rps(self) -> float:
        return float(statistics.median(s.capacity_rps for s in self.by_seed.values()))

    def to_dict(self) -> dict[str, object]:
        return {
            "policy": self.policy,
            "capacity_rps": _round(self.capacity_rps),
            "capacity_rps_by_seed": {
                str(k): _round(s.capacity_rps) for k, s in self.by_seed.items()
            },
            "search_by_seed": {str(k): _search_json(s) for k, s in self.by_seed.items()},
        }


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
    policies: Sequence[str],
    settings: CapacitySettings,
    start_rps: float | None = None,
    log: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
) -> list[PolicyCapacity]:
    """Search every (policy, seed) pair, up to `settings.workers` at a time."""
    start = start_rps or sc.default_rate_rps
    pairs = [(p, s) for p in policies for s in settings.seeds]
    results: dict[tuple[str, int], CapacitySearch] = {}
    if settings.workers == 1 or len(pairs) == 1:
        for p, s in pairs:
            results[p, s] = search_one(sc, p, s, settings, start)
            log(_line(p, s, results[p, s]))
    else:
        with ProcessPoolExecutor(max_workers=settings.workers) as pool:
            futures: dict[tuple[str, int], Future[CapacitySearch]] = {
                (p, s): pool.submit(search_one, sc, p, s, settings, start) for p, s in pairs
            }
            for (p, s), fut in futures.items():
                results[p, s] = fut.result()
                log(_line(p, s, results[p, s]))
    return [PolicyCapacity(p, {s: results[p, s] for s in settings.seeds}) for p in policies]


def _line(policy: str, seed: int, s: CapacitySearch) -> str:
    return (
        f"capacity {policy} seed {seed}: {s.capacity_rps:.3g} r/s "
        f"(bracket {s.lo_rps}..{s.hi_rps}, {s.iterations} probes)"
    )
