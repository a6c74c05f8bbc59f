"""Where the control plane runs beside vLLM's engine: its scheduling class and CPU affinity.

The engine's nice (cpu_priority.py) weighs it above the mesh's other processes, but on Linux's
fair scheduler a waking thread that has run little may still preempt the running engine at
once, and each of the control plane's many wake-ups per request can do so. Two further levers,
both off by default and set per replica:

- a scheduling class for the mesh's other processes: SCHED_BATCH keeps their share of the CPU
  but never lets their wake-up preempt a running thread (they wait for its slice to end or for
  a free core); SCHED_IDLE also gives them the smallest weight, so they run when nothing else
  of the mesh wants the core. Moving to either class needs no privilege.
- CPU affinity: the engine's main thread (the one running the model) on a set of CPUs, and the
  mesh's other processes on the rest (when some remain), so the control plane never runs on
  the engine's core. The engine's helper threads (its input and output socket threads, ZMQ's
  I/O thread) go where `EngineHelpers` says: on any CPU, on the control plane's CPUs, or on
  the engine's. They wake at every step's output (thousands of times a second at load) and,
  let onto the engine's core, a woken helper preempts the model's thread there each time;
  on the control plane's CPUs they run at the engine's priority, above the control plane.

A third, for a pinned engine: its main thread in the real-time class (SCHED_FIFO at the lowest
real-time priority), so no ordinary thread on its CPUs (another session's, a load generator's,
the engine's own helpers') preempts it; it leaves them only while it waits (for work, for the
interpreter lock), and the kernel's real-time throttling still leaves ordinary threads a share
of each second. It needs CAP_SYS_NICE.

"The mesh's other processes" are the Ray node's workers: the replica's parent (the raylet,
which starts every worker, so workers started later inherit its class and affinity) and its
descendants, the engine's processes excepted. Both settings are kept per thread by Linux, so
every thread is set; threads started later inherit their creator's, so an engine started after
a placement (a model swap) is given the default class and its own CPUs back.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from services.replica.vllm.cpu_priority import PROC, engine_processes, parent_and_name

MeshPolicy = Literal["batch", "idle"]
EngineHelpers = Literal["any", "rest", "engine"]
"""Where a pinned engine's helper threads run: any CPU, the CPUs left to the rest of the mesh,
or the engine's own CPUs."""

POLICIES: dict[str, int] = {"batch": os.SCHED_BATCH, "idle": os.SCHED_IDLE}
"""Linux scheduling class of each `MeshPolicy`."""


@dataclass(frozen=True)
class PlacementOutcome:
    """What `place_mesh` did."""

    engine_pids: tuple[int, ...]
    mesh_pids: tuple[int, ...]
    """The node's other processes (the raylet and its descendants, the engines excepted)."""
    applied: int
    """Thread settings made (a class and an affinity count apart)."""
    refused: str | None = None
    """The first error of a thread that kept its setting, None when every one was set."""

    def describe(self) -> str:
        said = (
            f"control-plane placement: {len(self.mesh_pids)} mesh processes, "
            f"engine {list(self.engine_pids)}, {self.applied} thread settings made"
        )
        return said if self.refused is None else f"{said}; some refused: {self.refused}"


def descendants(root: int, proc: Path = PROC) -> list[int]:
    """`root` and every process below it, in pid order."""
    parents: dict[int, int] = {}
    for entry in proc.iterdir():
        if entry.name.isdigit() and (st := parent_and_name(entry.name, proc)) is not None:
            parents[int(entry.name)] = st[0]
    below: set[int] = {root}
    changed = True
    while changed:
        changed = False
        for pid, ppid in parents.items():
            if ppid in below and pid not in below:
                below.add(pid)
                changed = True
    return sorted(below)


def node_root(pid: int, proc: Path = PROC) -> int:
    """The nearest ancestor of `pid` named raylet (the process that starts the node's workers);
    without one, `pid`'s parent (never pid 1), else `pid` itself."""
    seen, at = [], pid
    while at > 1 and at not in seen and (st := parent_and_name(str(at), proc)) is not None:
        seen.append(at)
        if at != pid and st[1].startswith("raylet"):
            return at
        at = st[0]
    return seen[1] if len(seen) > 1 else pid


def split_cpus(engine_cpus: Iterable[int], available: Iterable[int]) -> tuple[set[int], set[int]]:
    """(the engine's CPUs, the rest) among `available`; the rest is every available CPU when
    the engine's take them all (the control plane is never left without a CPU)."""
    have = set(available)
    engine = set(engine_cpus) & have
    if not engine:
        return have, have
    rest = have - engine
    return engine, rest or have


def threads(pid: int, proc: Path = PROC) -> list[int]:
    try:
        return [int(t.name) for t in (proc / str(pid) / "task").iterdir()]
    except OSError:
        return []


REALTIME = os.SCHED_FIFO | os.SCHED_RESET_ON_FORK
"""The class of a real-time engine thread: first in, first out, priority `REALTIME_PRIORITY`,
and threads or processes it starts get the default class back."""
REALTIME_PRIORITY = 1
"""The lowest real-time priority: above every ordinary thread, below the kernel's own."""


def _set_class(tid: int, cls: int) -> None:
    os.sched_setscheduler(tid, cls, os.sched_param(REALTIME_PRIORITY if cls == REALTIME else 0))


def helper_cpus(
    helpers: EngineHelpers, cpus: tuple[set[int], set[int]], have: set[int]
) -> set[int]:
    """The CPUs of a pinned engine's helper threads, `cpus` being (the engine's, the rest)."""
    return {"any": have, "rest": cpus[1], "engine": cpus[0]}[helpers]


def place_mesh(
    policy: MeshPolicy | None,
    engine_cpus: tuple[int, ...] | None,
    replica: int | None = None,
    proc: Path = PROC,
    setscheduler: Callable[[int, int], None] | None = None,
    setaffinity: Callable[[int, set[int]], None] = os.sched_setaffinity,
    available: Iterable[int] | None = None,
    helpers: EngineHelpers = "any",
    known: Iterable[int] = (),
    realtime: bool = False,
) -> PlacementOutcome:
    """Give the node's other processes `policy` (the engine's threads the default class) and
    pin each engine's main thread, the one running the model, to `engine_cpus` (the others to
    the rest, the engine's other threads and processes as `helpers` says, among `available`,
    default: every CPU the kernel lists, which the kernel narrows to this process's cpuset);
    `replica` is this replica's pid (default: this process), `known` the engine pids vLLM
    gave (`cpu_priority.vllm_engine_pids`: an engine whose title is missing is still one).
    With `realtime` and `engine_cpus`, each engine's main thread runs in the `REALTIME` class
    on its CPUs (no ordinary thread preempts it there; it yields them only when it waits)."""
    me = os.getpid() if replica is None else replica
    set_class = setscheduler or _set_class
    engines = tuple(engine_processes(me, proc, known))
    root = node_root(me, proc)
    hidden = set(engines)
    for pid in engines:
        hidden.update(descendants(pid, proc))
    mesh = tuple(p for p in descendants(root, proc) if p not in hidden)
    have = set(range(os.cpu_count() or 1)) if available is None else set(available)
    cpus = split_cpus(engine_cpus, have) if engine_cpus is not None else None
    done, refused = 0, None

    def attempt(action: Callable[..., None], *args: object) -> None:
        nonlocal done, refused
        try:
            action(*args)
            done += 1
        except ProcessLookupError:
            pass  # the thread ended meanwhile
        except OSError as err:
            refused = refused or (err.strerror or str(err))

    for pid in mesh:
        for tid in threads(pid, proc):
            if policy is not None:
                attempt(set_class, tid, POLICIES[policy])
            if cpus is not None:
                attempt(setaffinity, tid, cpus[1])
    # an engine started after a placement inherits it from the replica: undone here
    for pid in sorted(hidden):
        for tid in threads(pid, proc):
            if realtime and cpus is not None and tid in engines:
                attempt(set_class, tid, REALTIME)
            elif policy is not None:
                attempt(set_class, tid, os.SCHED_OTHER)
            if cpus is not None:
                attempt(
                    setaffinity,
                    tid,
                    cpus[0] if tid in engines else helper_cpus(helpers, cpus, have),
                )
    return PlacementOutcome(engines, mesh, done, refused)


REAPPLY_AFTER_S = (15.0, 60.0)
"""When `place_mesh_now_and_later` places the mesh again (seconds after the first time), for
workers and threads that started meanwhile from processes not yet placed."""


def place_mesh_now_and_later(
    policy: MeshPolicy | None,
    engine_cpus: tuple[int, ...] | None,
    log: logging.Logger,
    helpers: EngineHelpers = "any",
    known: Iterable[int] = (),
    realtime: bool = False,
) -> None:
    """Place the mesh now (logging what was done) and again at `REAPPLY_AFTER_S` on timer
    threads (daemons: they never hold a shutdown)."""
    me = os.getpid()

    def once(level: int) -> None:
        done = place_mesh(
            policy, engine_cpus, me, helpers=helpers, known=tuple(known), realtime=realtime
        )
        log.log(logging.WARNING if done.refused else level, done.describe())

    once(logging.INFO)
    for delay in REAPPLY_AFTER_S:
        timer = threading.Timer(delay, once, args=(logging.DEBUG,))
        timer.daemon = True
        timer.start()
