"""VBS admission, the TPOT guard (SCORPIO §3.4, eq. 8).

Admit w iff safety · EstimatedTPOT(VBS(R'), L_avg(R')) <= margin · min_{r∈R'} STP(r).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from services.replica.core.scorpio.tpot_model import DecodeTPOTModel
from services.replica.core.scorpio.vbs import Candidate, VBSAdmission, virtual_batch_size
from shared.domain.profile import DecodeCoeffs


@dataclass
class RecordingModel:
    """Returns a fixed TPOT and records what it was asked."""

    tpot_s: float
    calls: list[tuple[float, float]] = field(default_factory=list)

    def estimate_s(self, virtual_batch: float, mean_context: float) -> float:
        self.calls.append((virtual_batch, mean_context))
        return self.tpot_s


@pytest.mark.parametrize(
    ("stps", "expected"),
    [
        ([], 0.0),
        ([0.05], 1.0),
        ([0.05, 0.05], 2.0),
        ([2.0, 4.0, 6.0], 1.0 + 0.5 + 1.0 / 3.0),
        ([0.1, 0.05, 0.2], 0.5 + 1.0 + 0.25),
    ],
)
def test_virtual_batch_size(stps: list[float], expected: float) -> None:
    assert virtual_batch_size(stps) == pytest.approx(expected, rel=1e-12)


# safety 2 and margin 0.5 are powers of two, so estimate and limit are exact: the limit is
# 0.5 · 0.08 = 0.04 and a model TPOT of 0.02 gives an estimate of exactly 0.04.
@pytest.mark.parametrize(
    ("model_tpot_s", "admit"),
    [
        (math.nextafter(0.02, 0.0), True),
        (0.02, True),
        (math.nextafter(0.02, 1.0), False),
    ],
    ids=["just-under", "at", "just-over"],
)
def test_admit_reject_boundary(model_tpot_s: float, admit: bool) -> None:
    guard = VBSAdmission(RecordingModel(model_tpot_s), safety_factor=2.0, slo_margin=0.5)
    decision = guard.decide([Candidate(0.08, 100.0)], Candidate(0.16, 300.0))
    assert decision.limit_s == 0.04
    assert decision.estimated_tpot_s == 2.0 * model_tpot_s
    assert decision.admit is admit
    assert (decision.reason == "") is admit


def test_model_sees_vbs_and_mean_context_of_r_prime() -> None:
    model = RecordingModel(0.01)
    running = [Candidate(0.05, 100.0), Candidate(0.1, 300.0)]
    decision = VBSAdmission(model).decide(running, Candidate(0.2, 200.0))
    assert model.calls == [(pytest.approx(1.75), pytest.approx(200.0))]
    assert decision.virtual_batch == pytest.approx(1.75)
    assert decision.estimated_tpot_s == pytest.approx(1.3 * 0.01)
    assert decision.limit_s == pytest.approx(0.99 * 0.05)
    assert decision.admit


def test_decode_model_estimate_is_used() -> None:
    coeffs = DecodeCoeffs(d1=1e-6, d2=1e-3, d3=1e-5, d4=0.01)
    running = [Candidate(0.05, 1000.0)]
    decision = VBSAdmission(DecodeTPOTModel(coeffs)).decide(running, Candidate(0.1, 3000.0))
    vbs, ctx = 1.5, 2000.0
    expected = 1.3 * (1e-6 * vbs * ctx + 1e-3 * vbs + 1e-5 * ctx + 0.01)
    assert decision.estimated_tpot_s == pytest.approx(expected, rel=1e-12)
    assert decision.admit is (expected <= 0.99 * 0.05)


@pytest.mark.parametrize("candidate_stp_s", [0.1, 0.2, 0.5, 10.0])
def test_loose_request_raises_vbs_by_less_than_one(candidate_stp_s: float) -> None:
    running = [Candidate(0.05, 100.0), Candidate(0.05, 100.0), Candidate(0.1, 100.0)]
    before = virtual_batch_size([c.stp_s for c in running])
    decision = VBSAdmission(RecordingModel(0.0)).decide(running, Candidate(candidate_stp_s, 100.0))
    increase = decision.virtual_batch - before
    assert increase == pytest.approx(0.05 / candidate_stp_s)
    assert 0 < increase < 1


def test_tighter_candidate_lowers_limit_for_everyone() -> None:
    running = [Candidate(0.05, 100.0), Candidate(0.1, 100.0)]
    guard = VBSAdmission(RecordingModel(0.03))  # estimate 0.039
    loose = guard.decide(running, Candidate(0.1, 100.0))
    tight = guard.decide(running, Candidate(0.025, 100.0))
    assert loose.limit_s == pytest.approx(0.99 * 0.05)
    assert loose.admit
    assert tight.limit_s == pytest.approx(0.99 * 0.025)
    assert not tight.admit
    # TRPs recomputed over R': the running requests now count 0.5 and 0.25.
    assert tight.virtual_batch == pytest.approx(1.0 + 0.5 + 0.25)


def test_rejection_reason_names_estimate_limit_and_tightest_stp() -> None:
    guard = VBSAdmission(RecordingModel(0.1))
    decision = guard.decide([Candidate(0.05, 100.0)], Candidate(0.2, 100.0))
    assert not decision.admit
    assert "TPOT" in decision.reason
    assert "0.1300 s" in decision.reason  # estimate 1.3 · 0.1
    assert "0.0495 s" in decision.reason  # limit 0.99 · 0.05
    assert "tightest STP 0.0500 s" in decision.reason


def test_empty_running_set_compares_candidate_with_itself() -> None:
    decision = VBSAdmission(RecordingModel(0.01)).decide([], Candidate(0.02, 50.0))
    assert decision.virtual_batch == 1.0
    assert decision.limit_s == pytest.approx(0.99 * 0.02)
    assert decision.admit


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"safety_factor": 0.0}, "safety_factor"),
        ({"safety_factor": math.nan}, "safety_factor"),
        ({"slo_margin": 0.0}, "slo_margin"),
        ({"slo_margin": 1.01}, "slo_margin"),
    ],
)
def test_invalid_constructor_arguments(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        VBSAdmission(RecordingModel(0.01), **kwargs)


@pytest.mark.parametrize(
    ("candidate", "match"),
    [(Candidate(0.0, 10.0), "stp"), (Candidate(0.05, -1.0), "context_tokens")],
)
def test_invalid_candidate_raises(candidate: Candidate, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        VBSAdmission(RecordingModel(0.01)).decide([Candidate(0.05, 10.0)], candidate)
