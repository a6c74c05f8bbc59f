"""A host whose speed varies: a factor on every simulated step's duration, changing over time.

Why. On a shared host the engine's steps at one batch are not of one length. The live mesh's
decode step, at the same batch and offered rate, runs well above or below its fitted value for
spells of a second or so (the control plane's, the benchmark client's and other tenants' CPU on
the same cores). A simulated step of constant length misses two things that decide goodput at
capacity:
- the mean: a fitted median step is quicker than the mean step, so the simulator streams tokens
  the live mesh did not;
- the spells: an admission that predicts from what the mesh delivered in the last seconds is
  exact on a constant step; live, requests let in just before a slow spell wait for seats that
  free later than predicted and miss their TTFT.

The model. `HostSpeed` holds one factor per `bin_s`, from time 0 on (1.0 before and after).
`resample` draws it from a measured series (one factor per `bin_s`, None where nothing was
measured) by the moving-block bootstrap: consecutive runs of `block_s` taken whole from random
places of the series, so the factors keep their measured distribution and how long a slow spell
lasts. The draw is seeded (its own `random.Random`), so a seed gives one host. A replay of one
measured run uses its series as it was instead (`measured`: each factor at its own time).

`stretch` is the one place a step takes the host's speed: the simulated engines
(`lone_engine.py`, and each instance of the cluster simulator, `events.py`) call it on every
step they plan, before it runs.

Pure: the caller owns time.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from services.replica.core.engine_core import SimEngineCore
from services.replica.core.outputs import StepPlan


@dataclass(frozen=True)
class HostSpeed:
    """Step-duration factors, one per `bin_s` from time 0 (1.0 outside them)."""

    bin_s: float
    factors: tuple[float, ...]

    def __post_init__(self) -> None:
        if self.bin_s <= 0:
            raise ValueError(f"bin_s must be > 0, got {self.bin_s}")
        if any(not f > 0 for f in self.factors):
            raise ValueError("every factor must be > 0")

    def factor_at(self, t_s: float) -> float:
        """The factor of a step that starts at `t_s`."""
        if t_s < 0:
            return 1.0
        k = int(t_s / self.bin_s)
        return self.factors[k] if k < len(self.factors) else 1.0

    def mean(self) -> float:
        return sum(self.factors) / len(self.factors) if self.factors else 1.0


def resample(
    measured: Sequence[float | None],
    bin_s: float,
    block_s: float,
    horizon_s: float,
    seed: int,
) -> HostSpeed:
    """A host drawn from `measured` (one factor per `bin_s`, None: not measured) covering
    `horizon_s`, in blocks of `block_s` (module docstring). A block never spans a gap: the
    measured runs shorter than a block are used whole. Nothing measured: a constant host."""
    if bin_s <= 0 or block_s <= 0:
        raise ValueError(f"bin_s and block_s must be > 0, got {bin_s}, {block_s}")
    runs: list[list[float]] = [[]]
    for f in measured:
        if f is None:
            if runs[-1]:
                runs.append([])
        else:
            runs[-1].append(f)
    runs = [r for r in runs if r]
    need = max(0, math.ceil(horizon_s / bin_s))
    if not runs:
        return HostSpeed(bin_s, ())
    per_block = max(1, round(block_s / bin_s))
    starts = [(i, j) for i, r in enumerate(runs) for j in range(max(1, len(r) - per_block + 1))]
    rng = random.Random(seed)
    out: list[float] = []
    while len(out) < need:
        i, j = starts[rng.randrange(len(starts))]
        out += runs[i][j : j + per_block]
    return HostSpeed(bin_s, tuple(out[:need]))


def measured(series: Sequence[float | None], bin_s: float) -> HostSpeed:
    """The host of one measured run: `series` (one factor per `bin_s` from time 0, None: not
    measured, the profile's speed) as it was."""
    return HostSpeed(bin_s, tuple(1.0 if f is None else f for f in series))


def stretch(core: SimEngineCore, plan: StepPlan, speed: HostSpeed | None) -> None:
    """`plan`, just planned by `core`, at the host's speed when it starts: its duration, and
    the core's busy and KV-occupancy time for it, times the factor there (None: unchanged)."""
    if speed is None:
        return
    extra = plan.duration_s * (speed.factor_at(plan.start_s) - 1.0)
    plan.duration_s += extra
    core.busy_s += extra
    core.kv_block_seconds += plan.kv_used_fraction * extra
