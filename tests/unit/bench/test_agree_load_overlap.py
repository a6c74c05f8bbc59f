"""The live swaps' overlap fitted as the simulator's load slowdown
(slomesh/bench/agree/load_overlap.py)."""

from __future__ import annotations

import pytest

from slomesh.bench.agree.load_overlap import fit_load_slowdown, overlap_s


def _log(*swaps: tuple[float, float], model: str = "m", ok: bool = True) -> dict:
    return {
        "swaps": [
            {"to_model": model, "started_unix_s": 1e9 + t, "seconds": d, "ok": ok} for t, d in swaps
        ]
    }


@pytest.mark.parametrize(
    ("spans", "k", "overlap"),
    [
        ([("r0", "m", 0.0, 10.0)], 0, 0.0),
        ([("r0", "m", 0.0, 10.0), ("r1", "m", 5.0, 10.0)], 0, 5.0),
        ([("r0", "m", 0.0, 10.0), ("r1", "m", 5.0, 10.0)], 1, 5.0),
        ([("r0", "m", 0.0, 10.0), ("r0", "m", 5.0, 10.0)], 0, 0.0),  # its own replica's
        # two others overlapping each other: their union counts once
        ([("r0", "m", 0.0, 10.0), ("r1", "m", 2.0, 4.0), ("r2", "m", 4.0, 10.0)], 0, 8.0),
    ],
)
def test_overlap_s(spans: list, k: int, overlap: float) -> None:
    assert overlap_s(spans, k) == pytest.approx(overlap)


@pytest.mark.parametrize(
    ("logs", "solo", "slowdown", "used"),
    [
        ({"r0": _log((0.0, 10.0))}, {"m": 10.0}, 0.0, 0),  # alone: nothing to fit
        # both at once, each 15 s for 10 s of work: a / (1 + a) = 5 / 15 -> a = 0.5
        ({"r0": _log((0.0, 15.0)), "r1": _log((0.0, 15.0))}, {"m": 10.0}, 0.5, 2),
        ({"r0": _log((0.0, 10.0)), "r1": _log((0.0, 10.0))}, {"m": 10.0}, 0.0, 2),
        ({"r0": _log((0.0, 9.0)), "r1": _log((0.0, 9.0))}, {"m": 10.0}, 0.0, 2),  # clipped at 0
        ({"r0": _log((0.0, 15.0)), "r1": _log((0.0, 15.0))}, {}, 0.0, 0),  # no solo time
        ({"r0": _log((0.0, 15.0), ok=False), "r1": _log((0.0, 15.0))}, {"m": 10.0}, 0.0, 0),
    ],
)
def test_fit_load_slowdown(logs: dict, solo: dict, slowdown: float, used: int) -> None:
    fit = fit_load_slowdown(logs, solo)
    assert (fit.slowdown, fit.overlapping) == (pytest.approx(slowdown), used)
