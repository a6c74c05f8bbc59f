"""`slomesh profile-adapters`' page: the figures it measured, in milliseconds, with the command
and the load average; order statistics of the samples."""

from __future__ import annotations

import pytest

from slomesh.cli.profile_adapters import _stats, render


def test_stats_are_order_statistics() -> None:
    s = _stats([0.3, 0.1, 0.2, 0.4])
    assert (s["n"], s["min"], s["max"]) == (4, 0.1, 0.4)
    assert s["median"] == pytest.approx(0.25) and s["p90"] == 0.4


def test_page_shows_the_measured_figures() -> None:
    one = _stats([0.002, 0.004])
    figures = {
        "engine": "vLLM x",
        "adapters": 4,
        "rank": 8,
        "slots": 1,
        "adapter_load_s": _stats([0.010, 0.020, 0.030]),
        "first_token_s": {
            "base_model": one,
            "adapter_loaded": one,
            "adapter_loaded_on_demand": one,
        },
        "command": "slomesh profile-adapters",
        "load_average": [3.0, 2.0, 1.0],
    }
    page = render(figures)
    assert "| adapter load (vLLM `load_lora_adapter`) | 3 | 20.0 | 30.0 | 10.0 | 30.0 |" in page
    assert "`slomesh profile-adapters`" in page and "3.0, 2.0, 1.0" in page
    assert page.count("one-token request") == 3
