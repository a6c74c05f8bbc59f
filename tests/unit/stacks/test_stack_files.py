"""Stack files: every shipped stack resolves, overrides merge, bad files fail naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.scheduler.core.global_policy import GlobalPolicy
from slomesh.stacks import STACKS, StackFileError, load_stack, stack_names
from slomesh.stacks.files import STACK_DIR
from slomesh.stacks.stages import STAGES


@pytest.mark.parametrize("name", stack_names())
def test_shipped_stack_resolves_and_builds(name: str) -> None:
    stack = load_stack(name)
    assert stack.name == name  # a file's name is its stem
    assert set(stack.stages) == set(STAGES)
    assert isinstance(stack.global_policy(simulated=True), GlobalPolicy)


@pytest.mark.parametrize(
    ("name", "policy", "queue", "mode", "preemption", "guards"),
    [
        ("vllm-fcfs", "round-robin", "fcfs", "continuous", "recompute", None),
        ("qlm", "qlm", "edf", "continuous", "auto", None),
        ("scorpio", "least-loaded", "edf", "continuous", "recompute", (True, True, True)),
        ("scorpio-no-guard", "least-loaded", "edf", "continuous", "recompute", (True, True, False)),
        ("scls", "batching", "fcfs", "static", "recompute", None),
        # the flagship runs the TTFT guard without VBS admission or credit batching
        ("slomesh", "qlm", "edf", "continuous", "recompute", (False, False, True)),
        ("slomesh-credit", "qlm", "edf", "continuous", "recompute", (True, False, True)),
        ("slomesh-vbs", "qlm", "edf", "continuous", "recompute", (False, True, True)),
        ("slomesh-swap", "qlm", "edf", "continuous", "auto", (False, False, True)),
        ("slomesh-no-scorpio", "qlm", "edf", "continuous", "recompute", None),
    ],
)
def test_stack_fields(name, policy, queue, mode, preemption, guards) -> None:
    s = load_stack(name)
    assert (s.policy, s.queue_policy, s.engine_mode, s.preemption_mode) == (
        policy,
        queue,
        mode,
        preemption,
    )
    got = (
        None
        if s.scorpio is None
        else (
            s.scorpio.credit_batching,
            s.scorpio.vbs_admission,
            s.scorpio.ttft_guard,
        )
    )
    assert got == guards


@pytest.mark.parametrize(
    ("name", "key", "value"),
    [
        ("qlm-no-evict", ("lso", "evict"), False),
        ("qlm-no-balance", ("lso", "balance"), False),
        ("qlm-no-pull", ("lso", "pull"), False),
        ("slomesh-no-bands", ("tenancy", "bands"), False),
        ("slomesh-no-bands", ("tenancy", "shed"), False),
        ("slomesh", ("tenancy", "shed"), True),
        ("slomesh", ("prefix", "enabled"), True),
        ("slomesh-evict-blind", ("eviction", "weigh_cost"), False),
        ("slomesh-queued-tight", ("tight", "direct_max_ttft_s"), None),
        ("slomesh-queued-tight", ("tight", "yield_to_swaps"), True),  # merged, not replaced
        ("slomesh", ("tight", "direct_while_queue_empty"), True),
        ("scls-no-slice", ("slice_iterations",), None),
        ("slo-odbs", ("placer",), "least-loaded"),
        ("qlm-true-lengths", ("lengths",), "true"),
        ("scls-live", ("lengths",), "hints"),
    ],
)
def test_override_files_set_one_option(name, key, value) -> None:
    opts = load_stack(name).policy_options
    for k in key[:-1]:
        opts = opts[k]
    assert opts[key[-1]] == value


def _write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_stack_file_by_path_extends_a_shipped_stack(tmp_path: Path) -> None:
    path = _write(tmp_path, "extends: slomesh\nname: mine\nstages:\n  preemption: recompute\n")
    s = STACKS.create(str(path))
    assert (s.name, s.preemption_mode, s.policy) == ("mine", "recompute", "qlm")
    assert s.description == load_stack("slomesh").description


def test_other_plugin_replaces_the_stage_params(tmp_path: Path) -> None:
    # slomesh's evictor has params {weigh_cost: true}; naming another plugin drops them
    path = _write(tmp_path, "extends: slomesh\nname: x\nstages:\n  evictor: none\n")
    opts = load_stack(str(path)).policy_options
    assert opts["lso"]["evict"] is False and "eviction" not in opts


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("extends: qlm\nname: x\nstages:\n  placer: max-min\n", "stages.placer: plugin 'max-min'"),
        (
            "extends: qlm\nname: x\nstages:\n  orderer: {plugin: qlm, params: {eviction: {}}}\n",
            "stages.orderer.params.eviction: not a parameter",
        ),
        (
            "extends: qlm\nname: x\nstages:\n  admitter: bouncer\n",
            "stages.admitter.plugin: unknown",
        ),
        ("extends: qlm\nname: x\nstages:\n  cache: lru\n", "stages.cache: not a stage"),
        ("name: x\ndescription: d\nstages:\n  placer: round-robin\n", "stages.admitter: missing"),
        ("extends: qlm\nname: x\nstages:\n  batch_former: scls-dp\n", "stages.batch_former"),
        ("extends: qlm\nname: x\npolicy: qlm\n", "policy: unknown key"),
        ("extends: vllm-fcfs\nstages: {}\nname: x\nextra: 1\n", "extra: unknown key"),
        ("extends: nosuch\nname: x\n", "unknown stack 'nosuch'"),
    ],
)
def test_bad_stack_file_names_the_field(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        load_stack(str(_write(tmp_path, text)))


def test_missing_file_and_self_extension(tmp_path: Path) -> None:
    with pytest.raises(StackFileError, match="does not exist"):
        load_stack(str(tmp_path / "none.yaml"))
    loop = _write(tmp_path, "extends: ./s.yaml\nname: x\n")
    with pytest.raises(StackFileError, match="extends itself"):
        load_stack(str(loop))


def test_library_holds_only_stack_files() -> None:
    assert {p.name for p in STACK_DIR.iterdir()} == {f"{n}.yaml" for n in stack_names()}
