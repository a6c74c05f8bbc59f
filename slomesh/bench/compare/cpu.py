"""CPU seconds a system's process tree spends, split into vLLM's engine core and the rest."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

ENGINE_MARKERS = ("EngineCore", "VLLM::Worker")
"""Process titles vLLM gives its engine-core and worker processes."""


@dataclass(frozen=True)
class CpuSplit:
    engine_s: float
    outside_s: float
    by_process: dict[str, float] = field(default_factory=dict)
    """CPU seconds per process title (where the CPU goes)."""
    engine_wait_s: float = 0.0
    """Seconds the engine processes' main threads were ready to run but waited for a core (the
    kernel's run-queue delay, /proc/<pid>/task/<pid>/schedstat; 0 where it is not kept)."""

    def minus(self, earlier: CpuSplit) -> CpuSplit:
        keys = self.by_process.keys() | earlier.by_process.keys()
        by = {k: self.by_process.get(k, 0.0) - earlier.by_process.get(k, 0.0) for k in keys}
        return CpuSplit(
            self.engine_s - earlier.engine_s,
            self.outside_s - earlier.outside_s,
            dict(sorted(by.items(), key=lambda kv: -kv[1])),
            self.engine_wait_s - earlier.engine_wait_s,
        )


def is_engine_process(name: str, cmdline: list[str]) -> bool:
    """Whether a process is vLLM's engine core (or one of its workers) by its title."""
    text = " ".join([name, *cmdline])
    return any(m in text for m in ENGINE_MARKERS)


def tree_cpu(pid: int) -> CpuSplit:
    """User + system CPU seconds of `pid` and every descendant, split engine / outside. A
    slomesh replica runs vLLM's front end in its actor: that process counts as outside (its
    per-token relay is what is measured); the engine core process counts as engine."""
    import psutil

    engine = outside = wait = 0.0
    by: dict[str, float] = {}
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return CpuSplit(0.0, 0.0)
    for p in procs:
        try:
            t = p.cpu_times()
            used = t.user + t.system
            title = _title(p.name(), p.cmdline())
            by[title] = by.get(title, 0.0) + used
            if is_engine_process(p.name(), p.cmdline()):
                engine += used
                wait += run_queue_wait_s(p.pid)
            else:
                outside += used
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return CpuSplit(engine, outside, by, wait)


def run_queue_wait_s(pid: int, proc: Path = Path("/proc")) -> float:
    """Seconds the main thread of `pid` has spent ready to run but waiting for a core (the
    second field of its schedstat, nanoseconds); 0 where the kernel keeps no schedstat. The
    main thread is the one that steps vLLM's engine (its model runs on it: one OpenMP thread);
    its I/O threads wake briefly and are left out."""
    try:
        return int((proc / str(pid) / "task" / str(pid) / "schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def _title(name: str, cmdline: list[str]) -> str:
    """A short label of a process: Ray's and vLLM's titles, else the program and module. A Ray
    actor's title names the method it runs now (`ray::ServeReplica:app:Deployment.method`,
    `ray::ServeController.listen_for_change`); the method is left out, so a process keeps its
    label between the two samples of a difference (else its whole life's CPU, start-up
    included, showed under the second label)."""
    first = cmdline[0] if cmdline else name
    if first.startswith("ray::"):
        return first.split(" ")[0].split(".")[0][:60]
    if first.startswith("VLLM::") or not cmdline:
        return first.split(" ")[0][:60]
    args = [a for a in cmdline[1:] if not a.startswith("-")][:1]
    return " ".join([first.rsplit("/", 1)[-1], *(a.rsplit("/", 1)[-1] for a in args)])[:60]
