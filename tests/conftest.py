"""Test tiers (markers registered in pyproject.toml), applied here by directory:

- `mesh`: tests/integration (starts a live Ray Serve mesh on ports 8000/9000);
- `vllm`: tests/vllm (runs the real vLLM engine, CPU build, in process);
- `gpu`: tests/gpu (needs a CUDA GPU; skipped without one);
- `slow`: tests/unit/experiments (runs experiments end to end). Other slow tests (whole
  simulator scenario runs) carry `pytest.mark.slow` in their modules.

`make unit` runs what is left: the fast tier of pure-core tests.

Tests that kill parts of the shared live mesh (`DESTRUCTIVE`) run after every other test that
uses it: Serve replaces what they kill, but the tests after them would otherwise meet a mesh
still recovering (replicas on new ports, health not yet re-probed, books not yet reconciled).
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
DESTRUCTIVE = {
    TESTS / "integration" / "test_mesh_faults.py",
    TESTS / "integration" / "test_mesh_shards.py",
}
"""Modules whose tests kill services of the session's `live_mesh`."""
TIERS = {
    TESTS / "integration": pytest.mark.mesh,
    TESTS / "vllm": pytest.mark.vllm,
    TESTS / "gpu": pytest.mark.gpu,
    TESTS / "unit" / "experiments": pytest.mark.slow,
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(item.path)
        for directory, mark in TIERS.items():
            if path.is_relative_to(directory):
                item.add_marker(mark)
    _destructive_last(items)


def _uses_live_mesh(item: pytest.Item) -> bool:
    return "live_mesh" in getattr(item, "fixturenames", ())


def _destructive_last(items: list[pytest.Item]) -> None:
    """Move the DESTRUCTIVE tests right after the last other test that uses `live_mesh`."""
    killers = [i for i in items if Path(i.path) in DESTRUCTIVE]
    if not killers:
        return
    rest = [i for i in items if Path(i.path) not in DESTRUCTIVE]
    users = [k for k, i in enumerate(rest) if _uses_live_mesh(i)]
    at = users[-1] + 1 if users else len(rest)
    items[:] = rest[:at] + killers + rest[at:]
