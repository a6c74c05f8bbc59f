"""The CPU a system's processes spend at each rate of the ladder: vLLM's engine cores and the
rest, sampled every `period_s` while the benchmark runs and split by the rates' runs (vLLM's
result: `date`, `duration`; `harness.rate_windows`).

Why. Where the engines' seats are full, goodput is the seats over the time a request holds one,
so a slower decode step is goodput lost, and two causes look alike from the client: the engine
core gets less of a core (the system's other processes take the CPU it would run on: engine
cores well below 1 per engine), or it spends more CPU on each token (it shares the cores' caches
and memory with them: more engine CPU per token served at the same batch). The page's table
says which, and how long the engine's main thread was ready to run but waited for a core (the
kernel's run-queue delay): the first cause measured directly. The host's other busy cores (the
load generator, other sessions' processes: the host's busy time less the system's) say how
busy the sitting's host was, which differs between sittings.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from slomesh.bench.compare.cpu import CpuSplit, tree_cpu


@dataclass(frozen=True)
class CpuSample:
    at_s: float
    """Unix seconds."""
    engine_s: float
    """CPU seconds the engine processes had spent by then."""
    outside_s: float
    """CPU seconds the system's other processes had spent by then."""
    engine_wait_s: float = 0.0
    """Seconds the engine processes' main threads had waited, ready, for a core by then."""
    host_s: float = 0.0
    """CPU seconds the whole host had spent busy by then (`host_busy_s`; 0: not read)."""


def host_busy_s(stat: Path = Path("/proc/stat")) -> float:
    """CPU seconds every core of the host has spent busy since boot (user, nice, system, irq,
    softirq and steal time of /proc/stat's `cpu` line); 0.0 where it cannot be read."""
    try:
        first = stat.read_text().split("\n", 1)[0].split()
    except OSError:
        return 0.0
    if not first or first[0] != "cpu" or len(first) < 9:
        return 0.0
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in first[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


class Sampling(Protocol):
    """What the bench needs of a sampler (CpuSampler; tests give doubles)."""

    def start(self) -> None: ...

    def stop(self) -> list[CpuSample]: ...


class CpuSampler:
    """Samples a process tree's CPU split every `period_s` on a thread of its own, from
    `start()` to `stop()` (which returns the samples, in time order)."""

    def __init__(
        self,
        pid: int,
        cpu: Callable[[int], CpuSplit] = tree_cpu,
        period_s: float = 1.0,
        clock: Callable[[], float] = time.time,
        host: Callable[[], float] = host_busy_s,
    ) -> None:
        self.pid, self.cpu, self.period_s, self.clock = pid, cpu, period_s, clock
        self.host = host
        self.samples: list[CpuSample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        split = self.cpu(self.pid)
        self.samples.append(
            CpuSample(
                self.clock(), split.engine_s, split.outside_s, split.engine_wait_s, self.host()
            )
        )

    def start(self) -> None:
        def loop() -> None:
            while not self._stop.is_set():
                self.sample()
                self._stop.wait(self.period_s)

        self._thread = threading.Thread(target=loop, name="cpu-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> list[CpuSample]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self.samples


def cores_between(samples: Sequence[CpuSample], lo: float, hi: float) -> dict[str, float] | None:
    """The engine and outside cores busy over [lo, hi], from the first and last samples inside
    it (None with fewer than two seconds between them)."""
    inside = [s for s in samples if lo <= s.at_s <= hi]
    if len(inside) < 2 or inside[-1].at_s - inside[0].at_s < 2.0:
        return None
    a, b = inside[0], inside[-1]
    dt = b.at_s - a.at_s
    out = {
        "engine_cores": round((b.engine_s - a.engine_s) / dt, 3),
        "outside_cores": round((b.outside_s - a.outside_s) / dt, 3),
        "engine_wait_cores": round((b.engine_wait_s - a.engine_wait_s) / dt, 3),
        "seconds": round(dt, 1),
    }
    if a.host_s > 0 and b.host_s > 0:
        own = (b.engine_s - a.engine_s) + (b.outside_s - a.outside_s)
        out["host_other_cores"] = round(max(0.0, (b.host_s - a.host_s) - own) / dt, 3)
    return out


def cpu_by_rate(
    samples: Sequence[CpuSample], windows: Mapping[float, tuple[float, float]]
) -> list[dict[str, Any]]:
    """One row per rate (ascending) with enough samples inside its run."""
    rows = []
    for rate in sorted(windows):
        got = cores_between(samples, *windows[rate])
        if got is not None:
            rows.append({"rate_rps": rate, **got})
    return rows


def engine_us_per_token(
    engine_cores: float, served: int, output_len: int, duration_s: float
) -> float | None:
    """Engine CPU microseconds per output token served (None without tokens)."""
    tokens_s = served * output_len / duration_s if duration_s > 0 else 0.0
    return engine_cores * 1e6 / tokens_s if tokens_s > 0 else None
