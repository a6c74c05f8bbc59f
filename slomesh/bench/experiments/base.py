"""The experiment framework: typed arguments and the run / write / print flow of every experiment.

An experiment reproduces one figure of the QLM paper (SoCC'24, §8) in the simulator. Its
`execute` runs the simulations and returns JSON-ready results, markdown tables and the PNG
figures it drew; `Experiment.run` times it, writes `results.json` and `summary.md` into the out
folder (default runs/<name>) and prints the tables.
"""

from __future__ import annotations

import json
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from shared.metrics.summary import round_sig

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ExperimentArgs:
    """What `slomesh bench --scenario <experiment>` passes to an experiment."""

    out_dir: Path | None = None
    """Output folder; None: runs/<experiment name>."""
    seed: int = 0
    """Workload (or problem) seed; every random draw of the experiment derives from it."""
    requests: int | None = None
    """Requests per simulation (qlm-solver: the largest queue size); None: the experiment's."""
    progress: bool = False
    """Show a progress bar on stderr."""
    max_points: int | None = None
    """Keep at most this many points of each sweep (first and last kept); None: all. For tests."""

    def __post_init__(self) -> None:
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")
        if self.requests is not None and self.requests < 1:
            raise ValueError(f"requests must be >= 1, got {self.requests}")
        if self.max_points is not None and self.max_points < 1:
            raise ValueError(f"max_points must be >= 1, got {self.max_points}")


@dataclass(frozen=True, slots=True)
class ExperimentOutput:
    """What one experiment produced, before the common header is added."""

    results: dict[str, Any]
    """Experiment-specific JSON keys (merged after the header keys of results.json)."""
    tables: list[tuple[str, str]]
    """(heading, markdown table) sections of summary.md, printed in order."""
    figures: list[Path]
    """PNG files written into the out folder."""
    notes: list[str] = field(default_factory=list)
    """Lines of setup description printed above the tables."""


HEADER_KEYS = ("experiment", "figure", "description", "seed", "requests", "wall_s", "figures")


def jsonable(value: Any) -> Any:
    """A JSON-ready copy: floats rounded to 6 significant digits (NaN/inf -> None), tuples as
    lists, mapping keys as strings."""
    if isinstance(value, float):
        return round_sig(value) if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON-ready: {value!r}")


class Experiment(ABC):
    """One figure of the QLM paper as a named, seeded, re-runnable experiment."""

    name: ClassVar[str]
    """Registry name, also the default out folder runs/<name>."""
    figure: ClassVar[str]
    """The paper figure(s) it reproduces, e.g. "Figs. 9-10"."""
    description: ClassVar[str]
    """One line: what is varied and what is measured."""
    default_requests: ClassVar[int]
    """Requests per simulation when --requests is not given (a few minutes in all)."""

    def requests(self, args: ExperimentArgs) -> int:
        return args.requests if args.requests is not None else self.default_requests

    @abstractmethod
    def execute(self, args: ExperimentArgs, out_dir: Path) -> ExperimentOutput:
        """Run the simulations, draw the figures into `out_dir`; return results and tables."""

    def run(
        self,
        args: ExperimentArgs,
        echo: Callable[[str], None] = print,
        timer: Callable[[], float] = time.perf_counter,
    ) -> dict[str, Any]:
        """Execute, write results.json and summary.md, echo the tables; return the JSON dict."""
        out_dir = args.out_dir if args.out_dir is not None else Path("runs") / self.name
        out_dir.mkdir(parents=True, exist_ok=True)
        t0 = timer()
        out = self.execute(args, out_dir)
        wall_s = timer() - t0
        clash = set(HEADER_KEYS) & out.results.keys()
        if clash:
            raise ValueError(f"{self.name}: results reuse header keys {sorted(clash)}")
        data: dict[str, Any] = jsonable(
            {
                "experiment": self.name,
                "figure": self.figure,
                "description": self.description,
                "seed": args.seed,
                "requests": self.requests(args),
                "wall_s": wall_s,
                "figures": [p.name for p in out.figures],
                **out.results,
            }
        )
        text = json.dumps(data, indent=2, allow_nan=False) + "\n"
        (out_dir / "results.json").write_text(text, encoding="utf-8")
        md = self._markdown(args, out, wall_s)
        (out_dir / "summary.md").write_text(md + "\n", encoding="utf-8")
        echo(md)
        echo(f"wrote {out_dir}/ in {wall_s:.1f} s wall")
        return data

    def _markdown(self, args: ExperimentArgs, out: ExperimentOutput, wall_s: float) -> str:
        head = [
            f"# {self.name} (QLM paper {self.figure})",
            self.description,
            f"seed {args.seed}, {self.requests(args)} requests per run, {wall_s:.1f} s wall",
        ]
        parts: list[str] = ["\n\n".join(head)]
        if out.notes:
            parts.append("\n".join(f"- {n}" for n in out.notes))
        parts += [f"## {heading}\n\n{table}" for heading, table in out.tables]
        if out.figures:
            parts.append("Figures: " + ", ".join(p.name for p in out.figures))
        return "\n\n".join(parts)


def thin(values: Sequence[T], max_points: int | None) -> list[T]:
    """At most `max_points` of `values`, evenly spread, first and last kept (all when None)."""
    vals = list(values)
    if max_points is None or len(vals) <= max_points:
        return vals
    if max_points == 1:
        return [vals[0]]
    step = (len(vals) - 1) / (max_points - 1)
    return [vals[round(k * step)] for k in range(max_points)]
