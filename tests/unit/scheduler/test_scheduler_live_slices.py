"""Slice-level serving on the live scheduler core: batches formed by SCLS DP / SLO-ODBS
go to live replicas with a slice budget, and an unfinished request comes back to the pool at its
slice end (AdmissionCore.resume_slice), keeping its deadlines."""

from __future__ import annotations

import pytest

from services.scheduler.core.admission import AdmissionCore
from services.scheduler.core.batching.remaining_lengths import hinted_remaining_tokens
from services.scheduler.core.live_view import LiveReplica
from services.scheduler.core.policies import create_global_policy
from shared.domain import SLO, DecodeCoeffs, HardwareProfile, LengthHint, PrefillCoeffs, Request

PROFILE = HardwareProfile(
    gpu="cpu",
    model="m",
    tensor_parallel=1,
    prefill=PrefillCoeffs(1e-4, 0.0, 0.0, 0.01),
    decode=DecodeCoeffs(1e-7, 1e-4, 0.0, 0.01),
    kv_capacity_bytes=10**9,
    kv_bytes_per_token=1000,
    weight_bytes=10**9,
    swap_bytes_s=1e10,
    cold_load_bytes_s=1e9,
)


def req(rid: str, max_tokens: int = 64, hint: float | None = 40.0, arrival: float = 0.0) -> Request:
    h = LengthHint(hint, 1.0) if hint is not None else None
    return Request(rid, "m", 10, max_tokens, arrival, SLO(1.0), length_hint=h)


def core(options: dict[str, object], n: int = 2) -> AdmissionCore:
    opts = {"lengths": "hints", "min_interval_s": 0.5} | options
    replicas = [LiveReplica(f"replica-{k}", "cpu", "m", PROFILE) for k in range(n)]
    return AdmissionCore(replicas, create_global_policy("batching", opts), "scls", 16)


@pytest.mark.parametrize(
    ("options", "expected_slice"),
    [
        ({"slice_iterations": 8}, 8),  # SCLS: the configured slice
        ({"slice_iterations": None, "former": "slo-odbs"}, 40),  # UELLM: longest predicted
        ({"slice_iterations": None, "former": "fifo"}, 40),
    ],
)
def test_scheduler_live_batch_member_gets_slice_budget(
    options: dict[str, object], expected_slice: int
) -> None:
    c = core(options)
    d = c.admit(req("a"), 0.0)
    # an idle replica forms at once: the request is placed, with its slice budget
    assert d.admitted and d.replica is not None and not d.queued
    assert c.slice_tokens("a") == expected_slice
    assert c.slice_tokens("unknown") == 0


def test_scheduler_live_slice_end_returns_to_pool_and_is_placed_again() -> None:
    c = core({"slice_iterations": 8}, n=1)
    first = c.admit(req("a"), 0.0)
    assert first.replica is not None
    # the replica still has the batch's load: the continuation waits for the next formation
    again = c.resume_slice(req("a"), 8, 0.1)
    assert again.admitted
    placed = again.replica or next(r for q, r in c.take_dispatched() if q.request_id == "a")
    assert placed.application == "replica-0" and c.slice_tokens("a") == 8
    assert placed.in_flight["a"].arrival_s == 0.0  # the booked request, deadlines kept


def test_scheduler_live_continuing_request_is_not_expired_by_its_ttft_deadline() -> None:
    c = core({"slice_iterations": 8, "min_interval_s": 100.0}, n=1)
    c.admit(req("busy"), 0.0)
    c.admit(req("a"), 0.0)  # placed with "busy" or queued behind the interval
    c.take_dispatched()
    d = c.resume_slice(req("a"), 8, 0.2)
    # TTFT SLO 1 s long past, max queue wait too: a started stream is never answered 429
    assert "a" not in c.expire_queued(50.0, 0.1)
    assert d.admitted
    c.report("a", 20, 51.0)
    assert c.slice_tokens("a") == 0 and c.queued == 0


@pytest.mark.parametrize(
    ("hint", "max_tokens", "done", "expected"),
    [
        (40.0, 64, 0, 40.0),  # the prediction
        (40.0, 64, 30, 10.0),  # what is left of it
        (40.0, 64, 50, 50.0),  # outlived the prediction: as long again (doubling)
        (None, 64, 0, 32.0),  # no hint: uniform prior on [0, max_tokens]
        (0.0, 64, 0, 1.0),  # at least one token
    ],
)
def test_scheduler_hinted_remaining_tokens(
    hint: float | None, max_tokens: int, done: int, expected: float
) -> None:
    assert hinted_remaining_tokens(req("a", max_tokens, hint), done) == expected


def test_scheduler_batching_without_predictor_needs_hints_or_true_lengths() -> None:
    with pytest.raises(ValueError, match="needs a length predictor"):
        create_global_policy("batching", {"lengths": "predicted"})
    create_global_policy("batching", {"lengths": "hints"})  # the live mesh's setting


@pytest.mark.parametrize(("reform", "placed_at_once"), [(False, False), (True, True)])
def test_scheduler_live_slice_end_reforms_at_once_when_asked(
    reform: bool, placed_at_once: bool
) -> None:
    c = core({"slice_iterations": 8, "min_interval_s": 100.0, "reform_on_slice_end": reform}, n=1)
    c.admit(req("x"), 0.0)  # idle replica: formed alone at once
    assert c.admit(req("y"), 0.0).queued and c.admit(req("z"), 0.0).queued  # the interval
    c.report("x", 8, 0.1)  # the replica is idle again: y and z form one batch
    assert {r.request_id for r, _ in c.take_dispatched()} == {"x", "y", "z"}
    # y's slice ends while z still runs: the replica keeps z's batch load
    d = c.resume_slice(req("y"), 8, 0.2)
    assert (d.replica is not None) is placed_at_once and d.queued is not placed_at_once
