"""CPU priority of the vLLM engine-core process a replica starts.

On a host where the engine runs on the CPU (or drives a GPU from one CPU thread) beside the
control plane, both compete for the same cores: the ingress, scheduler, predictor, Serve and the
replica's own front end wake many times per request and each wake-up may take the engine's core
for a while, so the engine decodes slower than it would alone. The engine is the one process
whose speed sets how many requests finish within their SLO, so the replica gives it a higher
CPU priority (a lower nice) than everything else, once it has started.

The engine processes are the replica's descendants vLLM's process manager started (their pids
from vLLM itself) and those titled as vLLM's engine or workers: the engine sets its own title,
and a busy host has been seen to start one that kept its interpreter's name, which by title
alone would be taken for the control plane (and pinned beside it). Linux keeps a nice value
per thread, so every thread of the engine process is set; threads it starts later inherit
their creator's. With autogroups on (`/proc/sys/kernel/sched_autogroup_
enabled`), nice ranks threads within one session's group: the mesh started by one command
(`slomesh up`, `ray start`) is one session, so the engine ranks above the rest of the mesh, not
above other sessions on the host. Lowering a nice below its current value needs CAP_SYS_NICE
(or RLIMIT_NICE); without it the engine keeps its priority and the replica says so once.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

ENGINE_TITLES = ("EngineCore", "VLLM::Worker")
"""Process titles vLLM gives its engine-core process and its worker processes."""

PROC = Path("/proc")


@dataclass(frozen=True)
class PriorityOutcome:
    """What `prioritize_engine` did."""

    nice: int
    pids: tuple[int, ...]
    """The engine processes found (descendants of the replica's process)."""
    threads: int
    """Threads whose nice was set."""
    refused: str | None = None
    """Why some thread kept its priority (the first error), None when every one was set."""

    @property
    def set_all(self) -> bool:
        """Whether an engine process was found and every thread of it set."""
        return bool(self.pids) and self.refused is None

    def describe(self) -> str:
        if not self.pids:
            return f"engine CPU priority unchanged (nice {self.nice}): no engine process found"
        if self.refused is not None:
            return (
                f"engine CPU priority unchanged for some threads (nice {self.nice}: "
                f"{self.refused}); lowering a nice needs CAP_SYS_NICE, or set "
                "vllm.engine_nice: null"
            )
        return f"engine processes {list(self.pids)}: {self.threads} threads at nice {self.nice}"


def parent_and_name(pid: str, proc: Path = PROC) -> tuple[int, str] | None:
    """(parent pid, short name) of a process, None when it is gone."""
    try:
        text = (proc / pid / "stat").read_text()
    except OSError:
        return None
    name_end = text.rfind(")")
    name = text[text.find("(") + 1 : name_end]
    fields = text[name_end + 2 :].split()
    return int(fields[1]), name


def _title(pid: int, name: str, proc: Path) -> str:
    try:
        cmdline = (proc / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        cmdline = b""
    return f"{name} {cmdline.decode(errors='replace')}"


def vllm_engine_pids(llm: object) -> tuple[int, ...]:
    """The engine-core processes vLLM's AsyncLLM started, by its own process manager; () when
    it has none (the engine in-process, or in Ray actors). The title is set by the engine
    itself and may be missing (the process then keeps its interpreter's name), the pid not."""
    core = getattr(llm, "engine_core", None)
    manager = getattr(getattr(core, "resources", None), "engine_manager", None)
    procs = getattr(manager, "processes", None) or ()
    return tuple(p.pid for p in procs if isinstance(getattr(p, "pid", None), int))


def engine_processes(root: int, proc: Path = PROC, known: Iterable[int] = ()) -> list[int]:
    """The descendants of `root` titled as vLLM's engine core or workers, and those in `known`
    (pids vLLM gave, `vllm_engine_pids`), in pid order."""
    parents: dict[int, tuple[int, str]] = {}
    for entry in proc.iterdir():
        if entry.name.isdigit() and (st := parent_and_name(entry.name, proc)) is not None:
            parents[int(entry.name)] = st
    below: set[int] = {root}
    changed = True
    while changed:  # a tree of a few hundred processes: repeat until no new descendant
        changed = False
        for pid, (ppid, _) in parents.items():
            if ppid in below and pid not in below:
                below.add(pid)
                changed = True
    wanted = set(known)
    return sorted(
        pid
        for pid in below - {root}
        if pid in wanted or any(t in _title(pid, parents[pid][1], proc) for t in ENGINE_TITLES)
    )


def prioritize_engine(
    nice: int,
    root: int | None = None,
    proc: Path = PROC,
    setpriority: Callable[[int, int, int], None] = os.setpriority,
    known: Iterable[int] = (),
) -> PriorityOutcome:
    """Set every thread of the engine processes below `root` (this process; `known`: the
    engine pids vLLM gave) to `nice`."""
    pids = tuple(engine_processes(os.getpid() if root is None else root, proc, known))
    threads, refused = 0, None
    for pid in pids:
        try:
            tids = [int(t.name) for t in (proc / str(pid) / "task").iterdir()]
        except OSError:
            continue
        for tid in tids:
            try:
                setpriority(os.PRIO_PROCESS, tid, nice)
                threads += 1
            except ProcessLookupError:
                continue  # the thread ended meanwhile
            except OSError as err:
                refused = refused or (err.strerror or str(err))
    return PriorityOutcome(nice, pids, threads, refused)
