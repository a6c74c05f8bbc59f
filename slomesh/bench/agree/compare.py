"""Side-by-side attainment of live and simulated runs, ranking agreement, and RWT R².

Pure: takes RequestRecords and scored waits, returns plain data. Attainment is the fraction of a
class's requests whose SLO was met (RequestRecord.slo_met: rejected and unfinished requests
count as missed), in percent. Rankings agree when every pair of stacks is ordered the same
way on both sides, a pair whose attainments are within `tie_points` on a side counting as tied
there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

from services.scheduler.core.qlm.rwt_accuracy import r2_score
from services.scheduler.core.qlm.rwt_error import ScoredWait
from shared.metrics.records import RequestRecord

ALL = "all"


def attainment(records: Sequence[RequestRecord]) -> dict[str, tuple[int, float]]:
    """class -> (requests, SLO attainment %), plus ALL over every request."""
    by: dict[str, list[bool]] = {ALL: []}
    for r in records:
        by[ALL].append(r.slo_met)
        by.setdefault(r.class_name, []).append(r.slo_met)
    return {k: (len(v), 100.0 * sum(v) / len(v) if v else 0.0) for k, v in by.items()}


@dataclass(frozen=True, slots=True)
class AgreeRow:
    stack: str
    class_name: str
    requests: int
    live_pct: float
    sim_pct: float

    @property
    def diff_points(self) -> float:
        """live - sim, percentage points."""
        return self.live_pct - self.sim_pct


def side_by_side(
    live: Mapping[str, Sequence[RequestRecord]], sim: Mapping[str, Sequence[RequestRecord]]
) -> list[AgreeRow]:
    """One row per (stack, class) present on both sides; ALL first within each stack."""
    rows = []
    for stack in live:
        if stack not in sim:
            continue
        a, b = attainment(live[stack]), attainment(sim[stack])
        for cls in [ALL, *sorted(k for k in a if k != ALL and k in b)]:
            rows.append(AgreeRow(stack, cls, a[cls][0], a[cls][1], b[cls][1]))
    return rows


def _order(x: float, y: float, tie_points: float) -> int:
    d = x - y
    return 0 if abs(d) <= tie_points else (1 if d > 0 else -1)


def ranking(att: Mapping[str, float]) -> list[str]:
    """Stacks by attainment, best first (names break ties, for a stable print)."""
    return sorted(att, key=lambda p: (-att[p], p))


def rankings_agree(
    live: Mapping[str, float], sim: Mapping[str, float], tie_points: float = 0.0
) -> bool:
    """True when every pair of stacks is ordered (or tied) the same way on both sides."""
    if set(live) != set(sim):
        raise ValueError(f"stacks differ: live {sorted(live)} vs sim {sorted(sim)}")
    return all(
        _order(live[p], live[q], tie_points) == _order(sim[p], sim[q], tie_points)
        for p, q in combinations(sorted(live), 2)
    )


def max_spread(att: Mapping[str, float]) -> float:
    """The largest attainment difference between two stacks, points."""
    return max(att.values()) - min(att.values()) if att else 0.0


@dataclass(frozen=True, slots=True)
class RWTScore:
    """How the waiting-time estimator did on requests queued behind >= min_groups groups."""

    pairs: int
    r2_point: float | None
    """R² of the point (mean) prediction against measured = predicted."""
    coverage_quantile: float | None
    """Fraction of measured waits <= the model's decision quantile."""
    coverage_widened: float | None
    """Fraction of measured waits <= the quantile widened by the recent error."""
    mean_abs_error_s: float | None
    """Mean |measured - point|."""


def rwt_score(scored: Sequence[ScoredWait], min_groups: int = 4) -> RWTScore:
    sel = [s for s in scored if s.groups_queued >= min_groups]
    if not sel:
        return RWTScore(0, None, None, None, None)
    n = len(sel)
    return RWTScore(
        pairs=n,
        r2_point=r2_score([s.point_s for s in sel], [s.measured_s for s in sel]),
        coverage_quantile=sum(s.measured_s <= s.quantile_s for s in sel) / n,
        coverage_widened=sum(s.measured_s <= s.widened_s for s in sel) / n,
        mean_abs_error_s=sum(abs(s.measured_s - s.point_s) for s in sel) / n,
    )
