"""BatchingPolicy over fake batch-taking instances: pool, formation timing, loads, slices."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from services.predictor.core.registry import create_predictor
from services.scheduler.core.batching.config import BatchingConfig
from services.scheduler.core.batching.policy import BatchingPolicy
from services.scheduler.core.batching.registry import BATCH_FORMERS, BATCH_PLACERS
from services.scheduler.core.batching.remaining_lengths import remaining_tokens
from shared.domain import SLO, Request
from shared.domain.engine import SliceEntry
from shared.policy import UnknownNameError

# one formation every 3 s at least; lengths are the true ones so batches are predictable
CFG = {"former": "fifo", "placer": "least-loaded", "lengths": "true", "min_interval_s": 3.0}


def req(rid: str, arrival: float = 0.0, out: int = 20, model: str = "m") -> Request:
    return Request(rid, model, 100, 200, arrival, SLO(60.0), true_output_tokens=out)


@pytest.fixture
def batch_fake(fakes):
    @dataclass
    class BatchFake(fakes.instance):
        batches: list[tuple[list[SliceEntry], int, float]] = field(default_factory=list)

        def ids(self) -> list[list[str]]:
            return [[e.request.request_id for e in b] for b, _, _ in self.batches]

    return BatchFake


def policy(**overrides) -> BatchingPolicy:
    return BatchingPolicy(
        BatchingConfig.model_validate(CFG | overrides), create_predictor("online-histogram")
    )


def serve_time(inst, batch) -> float:
    entries, iterations, _ = batch
    padded = max(e.request.input_tokens + e.output_tokens for e in entries)
    return inst.profile("m").serve_time_s(len(entries), padded, iterations)


@pytest.mark.parametrize(("n_instances", "second_at_once"), [(1, False), (2, True)])
def test_formation_at_once_on_idle_instances_else_after_the_interval(
    fakes, batch_fake, n_instances, second_at_once
):
    insts = [batch_fake(f"i{k}") for k in range(n_instances)]
    p, rej = policy(), fakes.rejector()
    p.on_arrival(req("r1", 0.0), insts, rej, 0.0)
    assert insts[0].ids() == [["r1"]]  # an idle instance: formed at once
    assert p.pool == {} and p.formations == 1
    assert p.loads["i0"] == pytest.approx(serve_time(insts[0], insts[0].batches[0]))
    assert p.describe("r1") == {"slomesh.batch": 0, "slomesh.instance": "i0"}

    p.on_arrival(req("r2", 1.0), insts, rej, 1.0)
    if second_at_once:
        assert insts[1].ids() == [["r2"]]
        assert p.pool == {}
        return
    assert list(p.pool) == ["r2"]  # every instance is busy: wait for the next round
    assert p.describe("r2") == {"slomesh.batching": "pool", "slomesh.pool_size": 1}
    p.on_arrival(req("r3", 2.0), insts, rej, 2.0)
    p.on_step_end(insts[0], rej, 2.999)
    assert insts[0].ids() == [["r1"]] and sorted(p.pool) == ["r2", "r3"]
    p.on_step_end(insts[0], rej, 3.0)  # Γ = 3 s after the first round
    assert insts[0].ids() == [["r1"], ["r2", "r3"]]
    assert p.pool == {} and p.formations == 2
    assert rej.rejected == []


def test_loads_rise_on_placement_and_fall_to_zero_when_members_leave(fakes, batch_fake):
    inst = batch_fake("i0")
    # unsliced batches of 5 iterations: (la + lbc) - lbc - la leaves float dust (~1e-17)
    p, rej = policy(slice_iterations=None), fakes.rejector()
    p.on_arrival(req("a", 0.0, out=5), [inst], rej, 0.0)
    load_a = p.loads["i0"]
    assert load_a > 0
    p.on_arrival(req("b", 1.0, out=5), [inst], rej, 1.0)
    p.on_arrival(req("c", 1.5, out=5), [inst], rej, 1.5)
    p.on_step_end(inst, rej, 4.0)
    assert inst.ids() == [["a"], ["b", "c"]]
    load_bc = serve_time(inst, inst.batches[1])
    assert p.loads["i0"] == pytest.approx(load_a + load_bc)

    p.on_finish(req("b", 1.0), "i0", 5, rej, 5.0)  # one member of two left: the batch still runs
    assert p.loads["i0"] == pytest.approx(load_a + load_bc)
    p.on_finish(req("c", 1.5), "i0", 5, rej, 5.0)
    assert p.loads["i0"] == pytest.approx(load_a)
    p.on_finish(req("a", 0.0), "i0", 5, rej, 6.0)
    assert p.loads["i0"] == 0.0  # exactly: the instance counts as idle again
    assert p.describe("a") == {} and p.describe("c") == {}
    p.on_arrival(req("d", 6.5), [inst], rej, 6.5)  # before the next round (7.0): idle forms
    assert inst.ids()[-1] == ["d"]


def test_sliced_entry_returns_to_the_pool_and_is_resubmitted_with_its_tokens(fakes, batch_fake):
    inst = batch_fake("i0")
    p, rej = policy(slice_iterations=8), fakes.rejector()
    p.on_arrival(req("long", 0.0, out=50), [inst], rej, 0.0)
    p.on_arrival(req("other", 0.5, out=50), [inst], rej, 0.5)  # pooled: i0 is busy
    assert inst.ids() == [["long"]] and inst.batches[0][1] == 8

    entry = SliceEntry(req("long", 0.0, out=50), output_tokens=8, first_token_s=0.2)
    p.on_slice_end(entry, "i0", rej, 1.0)  # its batch is over: i0 idles, so a round runs now
    assert p.loads["i0"] > 0
    assert inst.ids() == [["long"], ["long", "other"]]
    entries, iterations, _ = inst.batches[1]
    assert entries[0] == entry  # the output so far and the first token travel with it
    assert entries[1] == SliceEntry(req("other", 0.5, out=50))
    assert iterations == 8
    assert p.describe("long") == {"slomesh.batch": 1, "slomesh.instance": "i0"}


def test_sliced_entry_waits_in_the_pool_while_the_instance_is_busy(fakes, batch_fake):
    inst = batch_fake("i0")
    p, rej = policy(slice_iterations=8), fakes.rejector()
    p.on_arrival(req("a", 0.0, out=50), [inst], rej, 0.0)
    p.on_arrival(req("b", 0.5), [inst], rej, 0.5)
    p.on_step_end(inst, rej, 3.0)
    assert inst.ids() == [["a"], ["b"]]
    entry = SliceEntry(req("a", 0.0, out=50), output_tokens=8, first_token_s=0.1)
    p.on_slice_end(entry, "i0", rej, 3.5)  # b's batch still loads i0; next round at 6.0
    assert p.pool == {"a": entry}
    p.on_abort("a", rej, 4.0)
    assert p.pool == {}
    p.on_step_end(inst, rej, 7.0)
    assert inst.ids() == [["a"], ["b"]]  # nothing left to form


@pytest.mark.parametrize(
    ("lengths", "out", "done", "expected"),
    [
        ("true", 37, 0, 37),
        ("true", 37, 10, 27),
        ("true", 500, 0, 200),  # capped by max_tokens
        ("predicted", 37, 0, None),
        ("predicted", 37, 10, None),
    ],
)
def test_lengths_decide_the_iterations_of_an_unsliced_batch(
    fakes, batch_fake, lengths, out, done, expected
):
    inst = batch_fake("i0")
    p, rej = policy(lengths=lengths, slice_iterations=None), fakes.rejector()
    r = req("r", 0.0, out=out)
    if expected is None:
        predicted = remaining_tokens(p.predictor.predict(r), done)
        expected = max(1, min(r.max_tokens - done, round(predicted)))
        assert expected != out - done  # the predictor does not know this request's length
    if done:
        p.instances["i0"], p.loads["i0"] = inst, 0.0
        p.on_slice_end(SliceEntry(r, output_tokens=done), "i0", rej, 0.0)
    else:
        p.on_arrival(r, [inst], rej, 0.0)
    assert inst.ids() == [["r"]]
    assert inst.batches[0][1] == expected


def test_a_model_no_instance_serves_is_rejected_naming_it(fakes, batch_fake):
    p, rej = policy(), fakes.rejector()
    insts = [batch_fake("i0", models=("m",)), batch_fake("i1", models=("y",))]
    p.on_arrival(req("r", 0.0, model="x"), insts, rej, 0.0)
    assert len(rej.rejected) == 1
    rid, reason, now = rej.rejected[0]
    assert (rid, now) == ("r", 0.0)
    assert "'x'" in reason and "pre-formed batches" in reason
    assert p.pool == {} and insts[0].batches == [] and insts[1].batches == []


@pytest.mark.parametrize(
    ("knob", "registry"), [("former", BATCH_FORMERS), ("placer", BATCH_PLACERS)]
)
def test_unknown_former_or_placer_lists_the_valid_names(knob, registry):
    with pytest.raises(UnknownNameError) as err:
        policy(**{knob: "no-such-thing"})
    assert err.value.name == "no-such-thing"
    assert err.value.valid == registry.names()
    for name in registry.names():
        assert name in str(err.value)
