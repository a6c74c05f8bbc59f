"""Structure of the scheduler core and the composition root, checked on the source (`ast` and
text only; nothing is imported).

- The cluster scheduler core decides; it should not act. Every call of an instance method
  (submit, submit_batch, evict, resume, prewarm) under services/scheduler/core is listed in
  KNOWN_INSTANCE_CALLS with how many there are per file: the test fails on a new one and when
  a file has fewer than listed (so the entry shrinks until the core returns decisions as data).
- Stacks are applied as their files say: nothing in slomesh/cli writes a stack's scheduler or
  engine settings into a config or changes a stack's options (slomesh/stacks/live.py applies
  stacks; KNOWN_CLI_REWRITES names what is left).
- No import inside slomesh/ runs back up: sim and stacks import neither bench nor cli, bench
  imports no cli (KNOWN_UPWARD_IMPORTS names what is left).
- Every router has a section in core/routers/README.md and is named in a scheduler test.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CORE = ROOT / "services" / "scheduler" / "core"
INSTANCE_METHODS = frozenset({"submit", "submit_batch", "evict", "resume", "prewarm"})

KNOWN_INSTANCE_CALLS: dict[str, int] = {
    "services/scheduler/core/batching/policy.py": 1,
    "services/scheduler/core/flow_control.py": 2,
    "services/scheduler/core/global_policy.py": 2,
    "services/scheduler/core/prefix_pinning.py": 2,
    "services/scheduler/core/qlm/policy.py": 2,
    "services/scheduler/core/qlm/serving_operations.py": 4,
}
"""Instance-method calls left in the core, per file (calls on `self` are the file's own)."""

KNOWN_CLI_REWRITES: dict[str, int] = {
    "slomesh/cli/bench_agree.py": 2,  # QLM options for the agreement runs, live and simulated
}
STACK_KEYS = frozenset({"policy", "policy_options", "queue_policy", "scorpio", "ttft_guard"})

KNOWN_UPWARD_IMPORTS: dict[str, set[str]] = {
    "slomesh/bench/compare/run.py": {"slomesh.cli"},
}
UPWARD = {
    "sim": ("slomesh.bench", "slomesh.cli"),
    "stacks": ("slomesh.bench", "slomesh.cli", "slomesh.sim"),
    "bench": ("slomesh.cli",),
}


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _tree(path: Path) -> ast.AST:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def instance_calls() -> Counter[str]:
    out: Counter[str] = Counter()
    for path in sorted(CORE.rglob("*.py")):
        if "fairness" in path.relative_to(CORE).parts:
            continue
        for node in ast.walk(_tree(path)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in INSTANCE_METHODS
                and not (isinstance(node.func.value, ast.Name) and node.func.value.id == "self")
            ):
                out[_rel(path)] += 1
    return out


def test_core_instance_calls_only_shrink() -> None:
    found = instance_calls()
    new = {f: n for f, n in found.items() if n > KNOWN_INSTANCE_CALLS.get(f, 0)}
    assert not new, f"new instance calls in the scheduler core (return decisions instead): {new}"
    gone = {f: (n, found.get(f, 0)) for f, n in KNOWN_INSTANCE_CALLS.items() if found.get(f, 0) < n}
    assert not gone, f"fewer instance calls than KNOWN_INSTANCE_CALLS lists (lower it): {gone}"


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
    assert found == KNOWN_UPWARD_IMPORTS


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
