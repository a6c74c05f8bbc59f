"""Per-request fidelity maths on a small hand table."""

from __future__ import annotations

import pytest

from slomesh.sim.fidelity import (
    compare,
    fidelity_table,
    median_timings,
    meets_target,
    relative_errors,
)
from slomesh.sim.replay import RequestTiming


def _t(rid: str, ttft: float, e2e: float, n: int = 3) -> RequestTiming:
    return RequestTiming(rid, 0.0, 10, n, ttft, e2e)


REAL = [_t("a", 1.0, 3.0), _t("b", 2.0, 4.0), _t("c", 4.0, 8.0), _t("d", 1.0, 2.0)]
# TTFT errors: +10%, -50%, +25%, 0%; E2E errors: 0%, +50%, -25%, +100%
SIM = [_t("d", 1.0, 4.0), _t("a", 1.1, 3.0), _t("b", 1.0, 6.0), _t("c", 5.0, 6.0)]


def test_relative_errors_pair_by_request_id() -> None:
    assert relative_errors(REAL, SIM, "TTFT") == pytest.approx([0.1, -0.5, 0.25, 0.0])
    assert relative_errors(REAL, SIM, "E2E") == pytest.approx([0.0, 0.5, -0.25, 1.0])
    # TPOT = (e2e - ttft) / 2: real 1, 1, 2, 0.5; sim 0.95, 2.5, 0.5, 1.5
    assert relative_errors(REAL, SIM, "TPOT") == pytest.approx([-0.05, 1.5, -0.75, 2.0])


def test_summary_median_p90_and_means() -> None:
    by = {e.metric: e for e in compare(REAL, SIM)}
    ttft = by["TTFT"]  # |err| sorted: 0, .1, .25, .5
    assert ttft.median_abs_err == pytest.approx(0.175)
    assert ttft.p90_abs_err == pytest.approx(0.25 + 0.7 * 0.25)  # linear interpolation
    assert ttft.median_signed_err == pytest.approx(0.05)
    assert ttft.mean_real_s == pytest.approx(2.0)
    assert ttft.mean_sim_s == pytest.approx(2.025)
    e2e = by["E2E"]  # |err| sorted: 0, .25, .5, 1
    assert e2e.median_abs_err == pytest.approx(0.375)
    assert e2e.p90_abs_err == pytest.approx(0.5 + 0.7 * 0.5)
    assert by["TPOT"].requests == 4
    assert not meets_target(list(by.values()))
    assert meets_target(compare(REAL, REAL))


def test_table_and_mismatched_sets() -> None:
    table = fidelity_table(compare(REAL, SIM))
    assert "| TTFT" in table and "17.5" in table
    with pytest.raises(ValueError, match="same"):
        compare(REAL, SIM[:3])


def test_median_timings_over_runs() -> None:
    runs = [REAL, SIM, [_t("a", 3.0, 9.0), _t("b", 0.5, 1.0), _t("c", 4.5, 7.0), _t("d", 2.0, 3.0)]]
    med = {t.request_id: t for t in median_timings(runs)}
    assert [t.request_id for t in median_timings(runs)] == ["a", "b", "c", "d"]
    assert (med["a"].ttft_s, med["a"].e2e_s) == (1.1, 3.0)
    assert (med["b"].ttft_s, med["b"].e2e_s) == (1.0, 4.0)
    assert (med["c"].ttft_s, med["c"].e2e_s) == (4.5, 7.0)
    assert (med["d"].ttft_s, med["d"].e2e_s) == (1.0, 3.0)
    assert median_timings([REAL]) == REAL
    with pytest.raises(ValueError):
        median_timings([])
