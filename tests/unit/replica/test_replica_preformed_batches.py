"""Pre-formed static batches (SCLS/UELLM): add_batch, one slice each, members finish or leave.

A queued batch runs as formed for its number of iterations (the prefill step included); members
that are done finish, the others leave the engine (StepResult.sliced) with their tokens so far.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from services.replica.core.engine_core import SimEngineCore
from services.replica.core.outputs import StepKind, StepPlan
from services.replica.core.sequence import Sequence
from shared.domain.engine import RequestTooLarge, SliceEntry


@dataclass
class Step:
    plan: StepPlan
    chunks: list[tuple[str, int]]
    finished: list[Sequence]
    sliced: list[Sequence]


@dataclass
class Run:
    steps: list[Step] = field(default_factory=list)

    def finished(self) -> dict[str, Sequence]:
        return {s.request_id: s for st in self.steps for s in st.finished}

    def sliced(self) -> dict[str, Sequence]:
        return {s.request_id: s for st in self.steps for s in st.sliced}

    def starts(self) -> list[list[str]]:
        """Members of each batch, in the order the batches started (their prefill steps)."""
        return [
            sorted(r for r, _ in st.chunks)
            for st in self.steps
            if st.plan.kind is StepKind.EXECUTE and all(n > 1 for _, n in st.chunks)
        ]


def run(core: SimEngineCore, t: float = 0.0, max_steps: int = 1000) -> Run:
    out = Run()
    for _ in range(max_steps):
        if not core.has_work:
            return out
        plan = core.schedule(t)
        chunks = [(c.seq.request_id, c.num_tokens) for c in plan.chunks]
        result = core.update(plan)
        out.steps.append(Step(plan, chunks, result.finished, result.sliced))
        t = plan.end_s
        check_counters(core)
    raise AssertionError("engine did not drain")


def check_counters(core: SimEngineCore) -> None:
    state = core.planner.state
    live = list(state.seqs.values())
    st = core.status()
    assert st.outstanding_output_tokens == sum(s.remaining_output_tokens for s in live)
    assert st.pending_prefill_tokens == sum(s.uncomputed_tokens for s in live)
    assert state.pool.used == sum(s.gpu_blocks for s in state.running)


def assert_empty(core: SimEngineCore) -> None:
    state = core.planner.state
    assert not core.has_work
    assert state.seqs == {}
    assert state.running == []
    assert state.pool.used == 0
    st = core.status()
    assert (st.waiting, st.running, st.outstanding_output_tokens) == (0, 0, 0)
    assert st.pending_prefill_tokens == 0


def static_core(h, capacity: int = 4096, **config) -> SimEngineCore:
    return h.core(capacity, mode="static", block_size_tokens=1, **config)


@pytest.mark.parametrize(
    ("iterations", "finished", "sliced", "steps"),
    [
        (4, ["a", "c"], {"b": 4}, 4),
        (2, ["a"], {"b": 2, "c": 2}, 2),
        (12, ["a", "b", "c"], {}, 10),  # ends early once every member is done
        (1, [], {"a": 1, "b": 1, "c": 1}, 1),
    ],
)
def test_slice_end_finishes_the_done_and_slices_the_rest(h, iterations, finished, sliced, steps):
    profile = h.profile(4096)
    core = h.core(profiles={"m": profile}, mode="static", block_size_tokens=1)
    reqs = [h.request("a", 10, 2), h.request("b", 20, 10), h.request("c", 5, 3)]
    core.add_batch([SliceEntry(r) for r in reqs], iterations, 0.0)
    assert core.has_work and set(core.planner.state.seqs) == {"a", "b", "c"}
    assert core.status().outstanding_output_tokens == 15
    result = run(core)
    assert len(result.steps) == steps
    first = result.steps[0]
    assert sorted(first.chunks) == [("a", 10), ("b", 20), ("c", 5)]
    assert first.plan.duration_s == pytest.approx(profile.prefill_time_s(3, 20))
    end = result.steps[-1].plan.end_s
    assert sorted(result.finished()) == finished
    for seq in result.finished().values():
        assert seq.finish_s == end  # the batch ends together
        assert seq.num_output_tokens == seq.target_output_tokens
    assert {rid: s.num_output_tokens for rid, s in result.sliced().items()} == sliced
    for seq in result.sliced().values():
        assert seq.first_token_s == first.plan.end_s
        assert seq.finish_s is None
    assert all(not st.finished and not st.sliced for st in result.steps[:-1])
    assert_empty(core)


def test_sliced_request_continues_in_a_later_batch_to_its_true_length(h):
    profile = h.profile(4096)
    core = h.core(profiles={"m": profile}, mode="static", block_size_tokens=1)
    long = h.request("long", 20, 10)
    core.add_batch([SliceEntry(long), SliceEntry(h.request("short", 8, 2))], 4, 0.0)
    first = run(core)
    seq = first.sliced()["long"]
    first_token = seq.first_token_s
    assert seq.num_output_tokens == 4 and first_token is not None
    t = first.steps[-1].plan.end_s

    entry = SliceEntry(long, output_tokens=4, first_token_s=first_token, preemptions=2)
    core.add_batch([entry], 10, t)
    st = core.status()
    assert st.outstanding_output_tokens == 6
    assert st.pending_prefill_tokens == 24  # prompt + the 4 tokens of the first slice
    second = run(core, t)
    assert second.steps[0].chunks == [("long", 24)]  # re-prefills its whole context
    assert second.steps[0].plan.duration_s == pytest.approx(profile.prefill_time_s(1, 24))
    assert len(second.steps) == 6  # tokens 5..10
    done = second.finished()["long"]
    assert done.num_output_tokens == 10
    assert done.first_token_s == first_token
    assert done.preemptions == 2
    assert done.finish_s == second.steps[-1].plan.end_s
    assert second.sliced() == {}
    assert_empty(core)


@pytest.mark.parametrize(
    ("mode", "entries", "iterations", "match"),
    [
        ("continuous", 0, 4, "non-empty"),
        ("static", 0, 4, "non-empty"),
        ("static", 1, 0, "iterations"),
    ],
)
def test_add_batch_rejects_bad_calls(h, mode, entries, iterations, match):
    core = h.core(4096, mode=mode)
    batch = [SliceEntry(h.request(f"r{k}", 10, 5)) for k in range(entries)]
    with pytest.raises(ValueError, match=match):
        core.add_batch(batch, iterations, 0.0)
    assert core.planner.state.seqs == {} and not core.planner.state.batches


def test_abort_while_queued_removes_the_member_from_its_batch(h):
    core = static_core(h)
    core.add_batch([SliceEntry(h.request("x1", 10, 3))], 8, 0.0)
    core.add_batch([SliceEntry(h.request(f"y{k}", 10, 3)) for k in (1, 2)], 8, 0.0)
    core.add_batch([SliceEntry(h.request("z1", 10, 3))], 8, 0.0)
    assert core.abort("y1")
    assert not core.abort("y1")  # already gone
    state = core.planner.state
    assert [[s.request_id for s in b] for b, _ in state.batches] == [["x1"], ["y2"], ["z1"]]
    assert core.abort("z1")  # the last member: its batch goes too
    assert [[s.request_id for s in b] for b, _ in state.batches] == [["x1"], ["y2"]]
    assert set(state.seqs) == {"x1", "y2"}
    check_counters(core)
    result = run(core)
    assert result.starts() == [["x1"], ["y2"]]
    assert sorted(result.finished()) == ["x1", "y2"]
    assert_empty(core)


def test_batches_run_one_after_another_in_submission_order(h):
    core = static_core(h)
    batches = [["b0", "b1"], ["c0"], ["a0", "a1", "a2"]]  # names do not sort in run order
    outputs = {"b0": 5, "b1": 2, "c0": 1, "a0": 3, "a1": 4, "a2": 6}
    for members in batches:
        entries = [SliceEntry(h.request(r, 10 + k, outputs[r])) for k, r in enumerate(members)]
        core.add_batch(entries, 16, 0.0)
    result = run(core)
    assert result.starts() == batches
    batch_of = {r: i for i, members in enumerate(batches) for r in members}
    seen: list[int] = []
    for st in result.steps:
        ids = {batch_of[r] for r, _ in st.chunks}
        assert len(ids) == 1  # one batch at a time
        seen.append(ids.pop())
    assert seen == sorted(seen)
    fin = result.finished()
    assert {r: s.num_output_tokens for r, s in fin.items()} == outputs
    ends = [max(fin[r].finish_s or 0.0 for r in members) for members in batches]
    assert ends == sorted(ends)
    assert_empty(core)


def test_batch_for_an_inactive_model_loads_it_first(h):
    profiles = {"m": h.profile(4096), "n": h.profile(4096, model="n")}
    core = h.core(profiles=profiles, active="m", mode="static")
    core.add_batch([SliceEntry(h.request("r", 10, 2, model="n"))], 4, 0.0)
    result = run(core)
    assert [st.plan.kind for st in result.steps] == [
        StepKind.LOAD_MODEL,
        StepKind.EXECUTE,
        StepKind.EXECUTE,
    ]
    assert result.steps[0].plan.load_model == "n"
    assert core.tiers.active == "n"
    assert sorted(result.finished()) == ["r"]
    assert_empty(core)


def test_check_fits_rejects_requests_larger_than_the_kv_cache(h):
    core = static_core(h, capacity=100)
    core.check_fits(h.request("fits", 60, 40))
    with pytest.raises(RequestTooLarge, match="exceeds the KV capacity"):
        core.check_fits(h.request("big", 60, 41))
    with pytest.raises(RequestTooLarge):
        core.add_batch([SliceEntry(h.request("big", 90, 50))], 4, 0.0)
    assert core.planner.state.seqs == {}


def test_add_batch_is_all_or_nothing(h) -> None:
    core = h.core(100, mode="static", block_size_tokens=1)
    entries = [SliceEntry(h.request("ok", 10, 5)), SliceEntry(h.request("big", 90, 50))]
    with pytest.raises(RequestTooLarge):
        core.add_batch(entries, 4, 0.0)
    assert not core.planner.state.seqs and not core.planner.state.batches and not core.has_work
    assert core.status().outstanding_output_tokens == 0


def test_queued_batch_members_count_as_waiting(h) -> None:
    core = h.core(1000, mode="static")
    core.add_batch([SliceEntry(h.request(r, 10, 5)) for r in ("a", "b")], 4, 0.0)
    assert core.status().waiting == 2 and core.has_work


@pytest.mark.parametrize(
    ("iterations", "finished", "sliced"),
    [
        (4, ["a", "c"], {"b": 4}),
        (2, ["a"], {"b": 2, "c": 2}),
        (12, ["a", "b", "c"], {}),
    ],
)
def test_continuous_slice_mode_members_leave_after_their_slice(h, iterations, finished, sliced):
    """SCLS for continuous batching (the live mesh's mode): members join the running batch
    through the waiting queue and each leaves on its own once it made `iterations` tokens."""
    core = h.core(4096, block_size_tokens=1)
    reqs = [h.request("a", 10, 2), h.request("b", 20, 10), h.request("c", 5, 3)]
    core.add_batch([SliceEntry(r) for r in reqs], iterations, 0.0)
    result = run(core)
    assert sorted(result.finished()) == finished
    assert {rid: s.num_output_tokens for rid, s in result.sliced().items()} == sliced
    assert_empty(core)


def test_continuous_slice_resumes_with_its_context_and_finishes(h):
    core = h.core(4096, block_size_tokens=1)
    long = h.request("long", 20, 10)
    core.add_batch([SliceEntry(long)], 4, 0.0)
    first = run(core)
    assert first.sliced()["long"].num_output_tokens == 4
    t = first.steps[-1].plan.end_s
    core.add_batch([SliceEntry(long, 4, first.sliced()["long"].first_token_s)], 4, t)
    assert core.status().pending_prefill_tokens == 24  # prompt + the 4 tokens so far
    second = run(core, t)
    assert second.steps[0].chunks == [("long", 24)]
    assert second.sliced()["long"].num_output_tokens == 8
    t = second.steps[-1].plan.end_s
    core.add_batch([SliceEntry(long, 8)], 4, t)
    third = run(core, t)
    assert third.finished()["long"].num_output_tokens == 10  # its true length, not the slice
    assert_empty(core)
