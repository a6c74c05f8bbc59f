"""Structure of the scheduler core and the composition root, checked on the source (`ast` and
text only; nothing is imported).

- The cluster scheduler core decides; it does not act. Under services/scheduler/core no call
  names an action on an instance (submit, submit_batch, evict, resume, prewarm, add_request,
  add_batch, abort) unless its receiver is `out` (the event's Decisions, core/decisions.py) or
  `self` (an object's own method); the instance view protocol (`InstanceView`) has no action.
- The simulator applies the core's outputs and calls no policy hook: nothing in slomesh/ calls
  a GlobalPolicy hook (on_arrival, on_step_end, ...); slomesh/sim hands events to the live
  scheduler's admission and cluster core (`scheduler.handle(`, slomesh/sim/scheduler.py) and
  applies what it returns (`self.applier.apply(`).
- Stacks are applied as their files say: nothing in slomesh/cli writes a stack's scheduler or
  engine settings into a config or changes a stack's options (slomesh/stacks/live.py applies
  stacks; KNOWN_CLI_REWRITES names what is left).
- No import inside slomesh/ runs back up: sim and stacks import neither bench nor cli, bench
  imports no cli, and the mesh launcher (slomesh/launch) none of them.
- Every router has a section in core/routers/README.md and is named in a scheduler test.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CORE = ROOT / "services" / "scheduler" / "core"
INSTANCE_ACTIONS = frozenset(
    {"submit", "submit_batch", "evict", "resume", "prewarm", "add_request", "add_batch", "abort"}
)
DECISION_SINKS = frozenset({"out", "self"})
"""Receivers an action-named call may have in the core: the event's Decisions, or the object
itself."""
POLICY_HOOKS = frozenset(
    {
        "on_arrival",
        "on_placed",
        "on_step_end",
        "on_finish",
        "on_engine_reject",
        "on_slice_end",
        "on_abort",
        "on_instance_lost",
        "on_instance_handed_over",
    }
)
VIEW_READS = frozenset(
    {
        "name",
        "gpu",
        "serves",
        "profile",
        "status",
        "status_after",
        "work_items",
        "holds",
        "token_budget",
        "max_num_seqs",
        "load_time_s",
    }
)

KNOWN_CLI_REWRITES: dict[str, int] = {
    "slomesh/cli/bench_agree.py": 1,  # QLM options for the agreement runs, simulated
    "slomesh/cli/bench_agree_live.py": 1,  # ... and live
}
STACK_KEYS = frozenset({"policy", "policy_options", "queue_policy", "scorpio", "ttft_guard"})

UPWARD = {
    "sim": ("slomesh.bench", "slomesh.cli"),
    "stacks": ("slomesh.bench", "slomesh.cli", "slomesh.sim"),
    "bench": ("slomesh.cli",),
    "launch": ("slomesh.bench", "slomesh.cli", "slomesh.sim"),
}


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _tree(path: Path) -> ast.AST:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _calls(path: Path, names: frozenset[str]) -> list[tuple[int, str, str]]:
    """(line, receiver, method) of every `receiver.method(...)` call with method in `names`."""
    out = []
    for node in ast.walk(_tree(path)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in names
        ):
            recv = node.func.value
            name = recv.id if isinstance(recv, ast.Name) else ast.unparse(recv)
            out.append((node.lineno, name, node.func.attr))
    return out


def test_the_core_calls_no_instance_action() -> None:
    found = [
        f"{_rel(path)}:{line} {recv}.{method}"
        for path in sorted(CORE.rglob("*.py"))
        for line, recv, method in _calls(path, INSTANCE_ACTIONS)
        if recv not in DECISION_SINKS
    ]
    assert found == [], f"the scheduler core acts on instances (write decisions to out): {found}"


def test_the_instance_view_is_read_only() -> None:
    tree = _tree(CORE / "cluster_view.py")
    view = next(
        n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "InstanceView"
    )
    members = {n.name for n in view.body if isinstance(n, ast.FunctionDef)}
    assert members == VIEW_READS


def test_nothing_in_slomesh_calls_a_policy_hook() -> None:
    found = [
        f"{_rel(path)}:{line} {recv}.{method}"
        for path in sorted((ROOT / "slomesh").rglob("*.py"))
        for line, recv, method in _calls(path, POLICY_HOOKS)
    ]
    assert found == [], f"policy hooks called outside the cluster core: {found}"


def test_the_simulator_hands_events_to_the_core_and_applies_its_output() -> None:
    sim = ROOT / "slomesh" / "sim" / "simulator.py"
    calls = {(recv, method) for _, recv, method in _calls(sim, frozenset({"handle", "apply"}))}
    assert ("scheduler", "handle") in calls and ("self.applier", "apply") in calls
    events = _tree(ROOT / "slomesh" / "sim" / "events.py")
    decided = [
        n
        for n in ast.walk(events)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "decide"
    ]
    assert len(decided) >= 4  # arrival, engine reject, slice end, step end


def cli_rewrites() -> Counter[str]:
    out: Counter[str] = Counter()
    for path in sorted((ROOT / "slomesh" / "cli").glob("*.py")):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.FunctionDef) and node.name in (
                "with_policy",
                "live_policy_options",
            ):
                out[_rel(path)] += 1
            elif isinstance(node, ast.Assign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if (
                        isinstance(t, ast.Subscript)
                        and isinstance(t.slice, ast.Constant)
                        and t.slice.value in STACK_KEYS
                    ):
                        out[_rel(path)] += 1
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "with_policy_options"
            ):
                out[_rel(path)] += 1
    return out


def test_cli_rewrites_no_stack() -> None:
    assert dict(cli_rewrites()) == KNOWN_CLI_REWRITES


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_no_import_runs_back_up_inside_slomesh() -> None:
    found: dict[str, set[str]] = {}
    for pkg, banned in UPWARD.items():
        for path in sorted((ROOT / "slomesh" / pkg).rglob("*.py")):
            bad = {
                b
                for b in banned
                for name in _imports(path)
                if name == b or name.startswith(b + ".")
            }
            if bad:
                found[_rel(path)] = bad
    assert found == {}, f"imports that run back up inside slomesh/: {found}"


def test_every_router_has_a_readme_section_and_a_test() -> None:
    readme = (CORE / "routers" / "README.md").read_text(encoding="utf-8")
    tests = "".join(
        p.read_text(encoding="utf-8")
        for p in (ROOT / "tests" / "unit" / "scheduler").glob("test_*.py")
    )
    names = []
    for path in sorted((CORE / "routers").glob("*.py")):
        m = re.search(r'^\s+name = "([a-z0-9-]+)"', path.read_text(encoding="utf-8"), re.M)
        if m:
            names.append(m.group(1))
    assert len(names) >= 7
    for name in names:
        assert f"`{name}`" in readme, f"{name}: no entry in core/routers/README.md"
        assert f'"{name}"' in tests or f"{name.title().replace('-', '')}" in tests, (
            f"{name}: no test"
        )
