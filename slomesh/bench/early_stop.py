"""A simulator that stops a capacity probe as soon as its verdict is certain (no approximation).

Two criteria, each a question about one probe at one rate:

- `overall`: attainment over all N requests >= target. Certain once ceil(target·N) requests met
  their SLO (attained), or more than N minus that missed (missed).
- `every-class`: attainment of every SLO class c (N_c requests) >= target. Missed as soon as
  one class has more than N_c - ceil(target·N_c) misses; attained once every class has
  ceil(target·N_c) met.

The attainment reported then is a bound on the criterion's figure (overall attainment, or the
lowest class attainment): met / N when attained, 1 - missed / N when missed.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Literal

from shared.domain import Request
from shared.metrics.records import RequestRecord
from slomesh.sim.cluster import ClusterSpec
from slomesh.sim.simulator import Simulator
from slomesh.stacks import StackConfig

Criterion = Literal["overall", "every-class"]
CRITERIA: tuple[Criterion, ...] = ("overall", "every-class")


class Decided(Exception):
    """Raised out of the event loop once a probe's verdict is certain."""

    def __init__(self, attainment: float) -> None:
        super().__init__(attainment)
        self.attainment = attainment


def _need(target: float, n: int) -> int:
    return math.ceil(target * n - 1e-9)


class EarlyStopSimulator(Simulator):
    """A Simulator that raises Decided once the criterion's verdict is certain either way."""

    def __init__(
        self,
        cluster: ClusterSpec,
        stack: StackConfig,
        requests: Sequence[Request],
        target: float,
        criterion: Criterion = "overall",
    ) -> None:
        super().__init__(cluster, stack, requests)
        if criterion == "overall":
            self._group = {r.request_id: "" for r in self.requests}
        else:
            self._group = {r.request_id: r.slo.class_name for r in self.requests}
        self._n = Counter(self._group.values())
        self._need = {g: _need(target, n) for g, n in self._n.items()}
        self._met: Counter[str] = Counter()
        self._missed: Counter[str] = Counter()
        self._open = set(self._n)
        """Groups whose met count has not reached its need yet."""

    def _add_record(self, rec: RequestRecord) -> None:
        super()._add_record(rec)
        g = self._group[rec.request_id]
        if rec.slo_met:
            self._met[g] += 1
            if self._met[g] >= self._need[g]:
                self._open.discard(g)
                if not self._open:
                    raise Decided(min(self._met[k] / self._n[k] for k in self._n))
        else:
            self._missed[g] += 1
            if self._missed[g] > self._n[g] - self._need[g]:
                raise Decided(1.0 - self._missed[g] / self._n[g])
