"""The overall search takes the every-class search's passing verdicts without probing again,
and finds the capacity two separate searches find."""

from __future__ import annotations

import pytest

import slomesh.bench.capacity_run as run
from slomesh.bench.capacity import CapacitySettings, search_capacity
from slomesh.bench.scenarios import SCENARIOS

# Attainment falling with the rate; overall never below the lowest class, as in a real probe.
CURVES = {"every-class": lambda r: 1.0 - r / 40.0, "overall": lambda r: 1.0 - r / 100.0}


@pytest.mark.parametrize(("start", "every_class"), [(1.0, True), (3.0, True), (3.0, False)])
def test_capacity_overall_search_reuses_every_class_passes(monkeypatch, start, every_class):
    probed: dict[str, list[float]] = {"every-class": [], "overall": []}

    def fake_probe(sc, policy, seed, settings, criterion="overall"):
        def probe(rate: float) -> float:
            probed[criterion].append(rate)
            return CURVES[criterion](rate)

        return probe

    monkeypatch.setattr(run, "make_probe", fake_probe)
    settings = CapacitySettings(seeds=[0], workers=1, every_class=every_class)
    (found,) = run.run_capacity(SCENARIOS.create("smoke"), ["edf"], settings, start, log=print)

    alone = {c: search_capacity(CURVES[c], start, 0.9) for c in CURVES}
    assert found.capacity_rps == alone["overall"].capacity_rps
    assert [r for r, _ in found.by_seed[0].probes] == [r for r, _ in alone["overall"].probes]
    if not every_class:
        assert found.every_class_by_seed == {}
        assert probed["overall"] == [r for r, _ in alone["overall"].probes]
        return
    assert found.every_class_rps == alone["every-class"].capacity_rps
    every_passed = {r for r, a in alone["every-class"].probes if a >= 0.9}
    assert every_passed  # the start rate at least
    assert set(probed["overall"]) == {r for r, _ in alone["overall"].probes} - every_passed
    for rate, att in found.by_seed[0].probes:  # a taken verdict records the every-class bound
        curve = CURVES["every-class" if rate in every_passed else "overall"]
        assert att == pytest.approx(curve(rate))
