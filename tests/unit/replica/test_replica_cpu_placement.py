"""Where the replica puts the control plane beside vLLM's engine (vllm/cpu_placement.py): the
Ray node's workers found from the replica, their class set, the engine pinned apart from them,
and a refusal reported instead of raised."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from services.replica.vllm.config import VLLMEngineConfig
from services.replica.vllm.cpu_placement import (
    REALTIME,
    EngineHelpers,
    node_root,
    place_mesh,
    split_cpus,
)
from tests.unit.replica.fake_proc import ProcTree
from tests.unit.replica.fake_proc import fake_proc as write_proc

# pid: (parent, short name, command line, threads)
TREE: ProcTree = {
    10: (1, "bash", "bash", (10,)),
    20: (10, "python", "slomesh up", (20,)),
    30: (20, "raylet", "raylet --node", (30, 31)),
    40: (20, "gcs_server", "gcs_server", (40,)),  # not a worker: left alone
    50: (30, "ray::ServeContr", "ray::ServeController", (50, 51)),
    60: (30, "ray::ServeRepli", "ray::ServeReplica:ingress", (60,)),
    100: (30, "ray::ServeRepli", "ray::ServeReplica:replica-0:Replica", (100, 101)),
    200: (100, "VLLM::EngineCor", "VLLM::EngineCore", (200, 201)),
    250: (200, "python", "python resource_tracker", (250,)),  # below the engine: the engine's
    300: (1, "python", "vllm bench serve", (300,)),  # the load generator: not the mesh
}


def fake_proc(root: Path) -> Path:
    return write_proc(root, TREE)


def test_the_node_root_is_the_raylet_above_the_replica(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path)
    assert node_root(100, proc) == 30
    assert node_root(200, proc) == 30  # from deeper down too
    assert node_root(20, proc) == 10  # no raylet above: the parent
    assert node_root(300, proc) == 300  # a parent of pid 1: itself


def test_the_class_goes_to_every_mesh_thread_and_no_engine_thread(tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    out = place_mesh(
        "batch", None, 100, fake_proc(tmp_path), lambda t, c: calls.append((t, c)), available={0}
    )
    mesh = [(t, os.SCHED_BATCH) for t in (30, 31, 50, 51, 60, 100, 101)]
    engine = [(t, os.SCHED_OTHER) for t in (200, 201, 250)]  # not inherited from the replica
    assert sorted(calls) == sorted(mesh + engine)
    assert (out.engine_pids, out.mesh_pids, out.applied) == ((200,), (30, 50, 60, 100), 10)
    assert out.refused is None


def test_pinning_puts_the_engine_on_its_cpus_and_the_mesh_on_the_rest(tmp_path: Path) -> None:
    pinned: dict[int, set[int]] = {}
    place_mesh(
        None,
        (1,),
        100,
        fake_proc(tmp_path),
        lambda t, c: pytest.fail("no class asked"),
        lambda t, cpus: pinned.__setitem__(t, cpus),
        available={0, 1},
    )
    assert {t for t, c in pinned.items() if c == {1}} == {200}  # the model's thread
    assert {t for t, c in pinned.items() if c == {0, 1}} == {201, 250}  # its helpers: anywhere
    assert {t for t, c in pinned.items() if c == {0}} == {30, 31, 50, 51, 60, 100, 101}


@pytest.mark.parametrize(("helpers", "want"), [("any", {0, 1}), ("rest", {0}), ("engine", {1})])
def test_the_engine_helpers_go_where_asked_and_the_model_thread_stays_alone(
    tmp_path: Path, helpers: EngineHelpers, want: set[int]
) -> None:
    pinned: dict[int, set[int]] = {}
    place_mesh(
        None,
        (1,),
        100,
        fake_proc(tmp_path),
        lambda t, c: pytest.fail("no class asked"),
        lambda t, cpus: pinned.__setitem__(t, cpus),
        available={0, 1},
        helpers=helpers,
    )
    assert pinned[200] == {1}
    assert (pinned[201], pinned[250]) == (want, want)  # its socket threads, its child process
    assert {t for t, c in pinned.items() if t not in (200, 201, 250)} == {
        30,
        31,
        50,
        51,
        60,
        100,
        101,
    }
    assert all(pinned[t] == {0} for t in (30, 31, 50, 51, 60, 100, 101))


def test_the_helpers_keep_every_cpu_when_the_engine_takes_them_all(tmp_path: Path) -> None:
    pinned: dict[int, set[int]] = {}
    place_mesh(
        None,
        (0, 1),
        100,
        fake_proc(tmp_path),
        setaffinity=lambda t, cpus: pinned.__setitem__(t, cpus),
        available={0, 1},
        helpers="rest",
    )
    assert pinned[201] == {0, 1}  # no CPU left apart from the engine's: never an empty set


def test_an_untitled_engine_named_by_vllm_is_pinned_apart_not_with_the_mesh(
    tmp_path: Path,
) -> None:
    untitled = {**TREE, 200: (100, "python", "python -c from multiprocessing.spawn", (200, 201))}
    proc = write_proc(tmp_path, untitled)
    pinned: dict[int, set[int]] = {}
    out = place_mesh(
        None,
        (1,),
        100,
        proc,
        setaffinity=lambda t, cpus: pinned.__setitem__(t, cpus),
        available={0, 1},
        helpers="rest",
        known=(200,),
    )
    assert out.engine_pids == (200,)
    assert (pinned[200], pinned[201]) == ({1}, {0})
    blind: dict[int, set[int]] = {}
    place_mesh(None, (1,), 100, proc, setaffinity=blind.__setitem__, available={0, 1})
    assert blind[200] == {0}  # found by title alone it would share the control plane's CPU


def test_realtime_puts_only_the_pinned_model_thread_in_the_realtime_class(
    tmp_path: Path,
) -> None:
    classes: dict[int, int] = {}
    out = place_mesh(
        "batch",
        (1,),
        100,
        fake_proc(tmp_path),
        classes.__setitem__,
        lambda t, cpus: None,
        available={0, 1},
        realtime=True,
    )
    assert classes[200] == REALTIME
    assert REALTIME & os.SCHED_RESET_ON_FORK  # what the engine thread starts gets none of it
    assert all(classes[t] == os.SCHED_OTHER for t in (201, 250))  # its helpers
    assert all(classes[t] == os.SCHED_BATCH for t in (30, 31, 50, 51, 60, 100, 101))
    assert out.refused is None
    unpinned: dict[int, int] = {}
    place_mesh(None, None, 100, fake_proc(tmp_path / "b"), unpinned.__setitem__, realtime=True)
    assert unpinned == {}  # an unpinned engine is never made real-time


@pytest.mark.parametrize(
    ("engine", "available", "want"),
    [
        ((1,), {0, 1}, ({1}, {0})),
        ((0, 1), {0, 1}, ({0, 1}, {0, 1})),  # the engine takes all: the mesh keeps them all
        ((7,), {0, 1}, ({0, 1}, {0, 1})),  # a CPU this process may not use: no pinning
        ((2, 3), {0, 1, 2, 3}, ({2, 3}, {0, 1})),
    ],
)
def test_split_cpus(engine: tuple[int, ...], available: set[int], want: object) -> None:
    assert split_cpus(engine, available) == want


def test_a_refusal_is_reported_not_raised(tmp_path: Path) -> None:
    def refuse(tid: int, cls: int) -> None:
        if tid == 50:
            raise OSError(errno.EPERM, "Operation not permitted")
        if tid == 51:
            raise ProcessLookupError(errno.ESRCH, "gone")

    out = place_mesh("idle", None, 100, fake_proc(tmp_path), refuse, available={0})
    assert out.applied == 5 + 3  # the engine's three threads too
    assert out.refused == "Operation not permitted"
    assert "Operation not permitted" in out.describe()


def test_the_config_fields_default_off_and_stay_out_of_vllm() -> None:
    base = {"model": "m"}
    off = VLLMEngineConfig.model_validate(base)
    assert (off.mesh_sched_policy, off.engine_cpus, off.engine_helpers) == (None, None, "any")
    on = VLLMEngineConfig.model_validate({**base, "mesh_sched_policy": "batch", "engine_cpus": [1]})
    assert (on.mesh_sched_policy, on.engine_cpus) == ("batch", (1,))
    assert "engine_cpus" not in on.engine_args_kwargs()
    assert "mesh_sched_policy" not in on.engine_args_kwargs()
    assert "engine_helpers" not in on.engine_args_kwargs()
    assert "engine_realtime" not in on.engine_args_kwargs()
    assert off.engine_realtime is False
    with pytest.raises(ValueError, match="engine_helpers"):
        VLLMEngineConfig.model_validate({**base, "engine_helpers": "elsewhere"})
    with pytest.raises(ValueError, match="mesh_sched_policy"):
        VLLMEngineConfig.model_validate({**base, "mesh_sched_policy": "fifo"})
