"""GPU-only tests: every test under tests/gpu is skipped, with the reason, where torch has no
CUDA device. The check runs in pytest_runtest_setup, before any fixture (module-scoped ones
included) is set up."""

from __future__ import annotations

import pytest


def _cuda_missing() -> str | None:
    try:
        import torch
    except ImportError:
        return "needs torch with CUDA: torch is not installed"
    if not torch.cuda.is_available():
        return "needs a CUDA GPU: torch.cuda.is_available() is False"
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    reason = _cuda_missing()
    if reason is not None:
        pytest.skip(reason)
