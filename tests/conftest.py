"""Test tiers (markers registered in pyproject.toml), applied here by directory:

- `mesh`: tests/integration (starts a live Ray Serve mesh on ports 8000/9000);
- `vllm`: tests/vllm (runs the real vLLM engine, CPU build, in process);
- `gpu`: tests/gpu (needs a CUDA GPU; skipped without one);
- `slow`: tests/unit/experiments (runs experiments end to end). Other slow tests (whole
  simulator scenario runs) carry `pytest.mark.slow` in their modules.

`make unit` runs what is left: the fast tier of pure-core tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
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
