"""The simulated side's own spread: one stack simulated over several timing seeds.

Under the live view (slomesh/sim/live_view.py) the simulator draws each report's delay and the
Status probes' phase from a seed. A stack near a tipping point (a guard that locks a class out,
a queue that tips into a backlog) can end far apart on two seeds of the same measured timing,
so a gap between live and simulated attainment means little unless it is wider than that
spread. `median_run` keeps the median seed's run for the stack's row, and every seed's
attainment for the page's band.
"""

from __future__ import annotations

from collections.abc import Sequence

from slomesh.bench.agree.compare import ALL, attainment
from slomesh.bench.agree.sim import SimRun


def median_run(runs: Sequence[SimRun]) -> tuple[SimRun, list[float]]:
    """The run of median overall attainment (the lower one of the middle two for an even
    count; ties in seed order) and each run's overall attainment, %, in seed order."""
    if not runs:
        raise ValueError("median_run: no runs")
    pcts = [attainment(r.records)[ALL][1] for r in runs]
    order = sorted(range(len(runs)), key=lambda k: (pcts[k], k))
    return runs[order[(len(runs) - 1) // 2]], pcts
