"""Architecture checks over the source tree (`ast` and text only; nothing is imported).

- No import cycle among the modules of shared/, services/ and slomesh/. Every import counts,
  including those under `if TYPE_CHECKING:` and inside function bodies: a cycle hidden there
  is still a cycle in the design. KNOWN_CYCLES names the ones still to remove.
- No source file over MAX_LINES lines (the generated protobuf code is exempt).
- shared/ imports nothing from the layers above it (services/, slomesh/).

The layer and service-independence contracts themselves are checked by import-linter
(`make lint`, [tool.importlinter] in pyproject.toml).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("shared", "services", "slomesh")
GENERATED = ROOT / "shared" / "rpc" / "slomesh"
MAX_LINES = 400
KNOWN_CYCLES: dict[frozenset[str], str] = {}
"""Cycles that exist today, each with what must change; the test fails on any other cycle and
when one of these is gone (so the entry gets deleted)."""


def source_files() -> Iterator[Path]:
    for pkg in PACKAGES:
        yield from sorted((ROOT / pkg).rglob("*.py"))


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_names(path: Path, module: str) -> Iterator[str]:
    """Every module name an import statement anywhere in the file refers to, made absolute.
    Only the named module counts, not the parent packages Python initialises on the way."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join([*base_parts, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            for alias in node.names:  # `X.y`: the submodule y, or a name in X (resolve())
                yield f"{base}.{alias.name}"


def resolve(name: str, modules: set[str]) -> str | None:
    """The longest prefix of `name` that is one of our modules (None: an external import)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def import_graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in source_files()}
    modules = set(files)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in files.items():
        for name in imported_names(path, module):
            target = resolve(name, modules)
            if target is not None and target != module:
                graph[module].add(target)
    return graph


def strongly_connected_components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm (iterative, so deep import chains cannot hit the recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def a_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One concrete cycle inside a strongly connected component: a -> b -> ... -> a."""
    members = set(component)
    start = component[0]
    # breadth-first search back to `start` inside the component: a shortest cycle through it
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if child not in previous:
                    previous[child] = node
                    nxt.append(child)
        frontier = nxt
    raise AssertionError(f"{component} is not a cycle")


def test_tarjan_finds_the_cycles_of_a_toy_graph() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    cyclic = [c for c in strongly_connected_components(graph) if len(c) > 1]
    assert cyclic == [["a", "b", "c"]]
    assert a_cycle(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]


def test_every_kind_of_import_is_seen(tmp_path: Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import a.top\n"
        "from . import sibling\n"
        "from ..up import thing\n"
        "if TYPE_CHECKING:\n"
        "    from a.typed import T\n"
        "def f():\n"
        "    from a.lazy import g\n",
        encoding="utf-8",
    )
    names = set(imported_names(source, "a.pkg.mod"))
    modules = {"a.top", "a.pkg.sibling", "a.up", "a.typed", "a.lazy", "a.pkg.mod"}
    resolved = {resolve(n, modules) for n in names} - {None}
    assert resolved == modules - {"a.pkg.mod"}
    assert len(import_graph()) > 100


def test_no_import_cycles() -> None:
    graph = import_graph()
    cycles = [c for c in strongly_connected_components(graph) if len(c) > 1]
    new = [c for c in cycles if frozenset(c) not in KNOWN_CYCLES]
    report = "\n".join(f"{' -> '.join(a_cycle(graph, c))}  (all of {', '.join(c)})" for c in new)
    assert not new, f"import cycles (TYPE_CHECKING and function-level imports count):\n{report}"
    gone = [sorted(k) for k in KNOWN_CYCLES if k not in {frozenset(c) for c in cycles}]
    assert not gone, f"these cycles are gone: delete them from KNOWN_CYCLES: {gone}"


def test_no_source_file_is_over_the_line_limit() -> None:
    too_long = {
        str(p.relative_to(ROOT)): n
        for p in source_files()
        if not p.is_relative_to(GENERATED)
        and (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not too_long, f"files over {MAX_LINES} lines: {too_long}"


def test_shared_imports_nothing_above_it() -> None:
    upward = re.compile(r"^\s*(from|import)\s+(services|slomesh)\b")
    hits = [
        f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
        for p in sorted((ROOT / "shared").rglob("*.py"))
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if upward.match(line)
    ]
    assert not hits, "shared/ imports from services/ or slomesh/:\n" + "\n".join(hits)
