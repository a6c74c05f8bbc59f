"""The replica's CPU priority for vLLM's engine-core process (vllm/cpu_priority.py):
which processes of a /proc tree are the engine's, every thread of them set, and a refusal
reported instead of raised."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from services.replica.vllm.config import VLLMEngineConfig
from services.replica.vllm.cpu_priority import (
    engine_processes,
    prioritize_engine,
    vllm_engine_pids,
)
from tests.unit.replica.fake_proc import ProcTree
from tests.unit.replica.fake_proc import fake_proc as write_proc

# pid: (parent, short name, command line, threads)
TREE: ProcTree = {
    100: (1, "ray::ServeRepli", "ray::ServeReplica:replica-0:Replica", (100, 101)),
    200: (100, "VLLM::EngineCor", "VLLM::EngineCore", (200, 201, 202)),
    250: (200, "python", "python -c from multiprocessing.resource_tracker import main", (250,)),
    300: (1, "VLLM::EngineCor", "VLLM::EngineCore", (300,)),  # another replica's engine
    400: (100, "python", "python worker", (400,)),
    410: (400, "VLLM::Worker_TP", "VLLM::Worker_TP0", (410, 411)),  # below a child, still ours
}


def fake_proc(root: Path) -> Path:
    return write_proc(root, TREE)


def test_engine_processes_are_the_titled_descendants(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path)
    assert engine_processes(100, proc) == [200, 410]
    assert engine_processes(300, proc) == []  # an engine is not its own descendant
    assert engine_processes(1, proc) == [200, 300, 410]


def test_an_untitled_engine_is_found_by_the_pid_vllm_gave(tmp_path: Path) -> None:
    untitled = {**TREE, 200: (100, "python", "python -c from multiprocessing.spawn", (200, 201))}
    proc = write_proc(tmp_path, untitled)
    assert engine_processes(100, proc) == [410]  # by title alone it is missed
    assert engine_processes(100, proc, known=(200,)) == [200, 410]
    assert engine_processes(100, proc, known=(300,)) == [410]  # not below the replica: not ours
    calls: list[int] = []
    out = prioritize_engine(-10, 100, proc, lambda _w, tid, _n: calls.append(tid), known=(200,))
    assert (out.pids, sorted(calls)) == ((200, 410), [200, 201, 410, 411])


def test_vllm_engine_pids_reads_the_process_manager() -> None:
    procs = [SimpleNamespace(pid=200), SimpleNamespace(pid=None)]
    llm = SimpleNamespace(
        engine_core=SimpleNamespace(
            resources=SimpleNamespace(engine_manager=SimpleNamespace(processes=procs))
        )
    )
    assert vllm_engine_pids(llm) == (200,)  # a process not started yet has no pid
    assert vllm_engine_pids(SimpleNamespace(engine_core=object())) == ()  # in-process engine
    assert vllm_engine_pids(None) == ()


def test_every_thread_of_each_engine_process_is_set(tmp_path: Path) -> None:
    calls: list[tuple[int, int, int]] = []
    outcome = prioritize_engine(
        -10, 100, fake_proc(tmp_path), lambda *a: calls.append((a[0], a[1], a[2]))
    )
    assert sorted(calls) == [(os.PRIO_PROCESS, t, -10) for t in (200, 201, 202, 410, 411)]
    assert (outcome.pids, outcome.threads, outcome.set_all) == ((200, 410), 5, True)
    assert "5 threads at nice -10" in outcome.describe()


@pytest.mark.parametrize(
    ("error", "threads", "set_all", "says"),
    [
        (OSError(errno.EACCES, "Permission denied"), 0, False, "Permission denied"),
        (ProcessLookupError(errno.ESRCH, "No such process"), 0, True, "0 threads at nice"),
    ],
)
def test_a_refusal_is_reported_not_raised(
    tmp_path: Path, error: OSError, threads: int, set_all: bool, says: str
) -> None:
    def refuse(which: int, who: int, nice: int) -> None:
        raise error

    outcome = prioritize_engine(-5, 100, fake_proc(tmp_path), refuse)
    assert (outcome.threads, outcome.set_all) == (threads, set_all)
    assert says in outcome.describe()
    if not set_all:
        assert "CAP_SYS_NICE" in outcome.describe()


def test_no_engine_found_is_reported(tmp_path: Path) -> None:
    outcome = prioritize_engine(-10, 400 + 10, fake_proc(tmp_path), lambda *a: None)
    assert not outcome.set_all
    assert "no engine process found" in outcome.describe()


def test_the_setting_is_bounded_and_can_be_off() -> None:
    base = {"model": "m"}
    assert VLLMEngineConfig.model_validate(base).engine_nice == -10
    assert VLLMEngineConfig.model_validate({**base, "engine_nice": None}).engine_nice is None
    with pytest.raises(ValueError, match="engine_nice"):
        VLLMEngineConfig.model_validate({**base, "engine_nice": -21})
    assert "engine_nice" not in VLLMEngineConfig.model_validate(base).engine_args_kwargs()
