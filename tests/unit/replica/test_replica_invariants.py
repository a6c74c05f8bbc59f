"""Engine invariants, checked after every step of seeded random runs (KV, swap, tokens, time)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from services.replica.core.outputs import StepKind

CAPACITY = 640  # tokens = 40 blocks of 16: far less than the offered load, so KV runs out
HOST_TOKENS = 300  # host swap space, in tokens: some swaps fit, some fall back to recompute


def random_requests(h, seed: int, n: int = 40) -> list:
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(0.02, n))
    inputs = rng.integers(1, 200, n)
    true_out = rng.integers(1, 100, n)
    max_tokens = rng.integers(1, 120, n)  # some below the true length: capped outputs
    ttft = rng.uniform(0.05, 2.0, n)
    return [
        h.request(
            f"r{k:03d}",
            int(inputs[k]),
            int(true_out[k]),
            arrival=float(arrivals[k]),
            max_tokens=int(max_tokens[k]),
            ttft=float(ttft[k]),
        )
        for k in range(n)
    ]


class EvictChaos:
    """Evicts a random live request now and then and resumes evicted ones later."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed + 1000)
        self.evictions = 0
        self.resumes = 0

    def __call__(self, core, now: float, step: int) -> None:
        # done-but-unfinished sequences (static batches hold them to the batch end) are left
        # alone: evicting one over-generates (test_replica_static_evict_of_done_sequence...)
        state = core.planner.state
        live = [*state.running, *state.waiting.sequences()]
        active = sorted({s.request_id for s in live if not s.is_done})
        if state.evicted and (len(active) <= 1 or self.rng.random() < 0.3):
            self.resumes += len(core.resume(sorted(state.evicted), now))
            return
        if len(active) >= 2 and self.rng.random() < 0.1:
            rid = str(self.rng.choice(active))
            self.evictions += len(core.evict([rid]))


MODES = [
    pytest.param("continuous", {"block_size_tokens": 16}, id="continuous"),
    pytest.param(
        "static",
        {"block_size_tokens": 16, "static_batch_size": 4, "static_iteration_limit": 24},
        id="static",
    ),
]


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("policy", ["fcfs", "edf", "oracle-edf"])
@pytest.mark.parametrize("preemption", ["recompute", "swap", "auto"])
@pytest.mark.parametrize(("mode", "extra"), MODES)
def test_replica_invariants_hold_after_every_step(h, mode, extra, preemption, policy, seed):
    core = h.core(
        CAPACITY,
        mode=mode,
        queue_policy=policy,
        preemption_mode=preemption,
        max_num_batched_tokens=128,
        max_num_seqs=8,
        host_swap_bytes=HOST_TOKENS * h.KVB,
        **extra,
    )
    requests = random_requests(h, seed)
    chaos = EvictChaos(seed)
    trace = h.drive(core, requests, hook=chaos)  # drive checks the invariants after each step

    assert chaos.evictions > 0 and chaos.resumes == chaos.evictions
    assert sorted(trace.finished) == sorted(r.request_id for r in requests)
    state = core.planner.state
    assert not core.has_work and not state.seqs and not state.evicted
    for r in requests:
        seq = trace.finished[r.request_id]
        want = min(r.true_output_tokens, r.max_tokens)
        assert seq.num_output_tokens == want
        assert trace.emitted[r.request_id] == want  # every token was emitted exactly once
        assert seq.first_token_s is not None and seq.finish_s is not None
        assert r.arrival_s <= seq.first_token_s <= seq.finish_s
    st = core.status()
    assert st.outstanding_output_tokens == 0
    assert (st.waiting, st.running, st.evicted, st.kv_used_blocks) == (0, 0, 0, 0)
    assert state.host.used_bytes == 0
    # time only moves forward, one step after the other
    plans = trace.plans()
    assert all(a.end_s <= b.start_s + 1e-12 for a, b in itertools.pairwise(plans))
    if mode == "continuous":  # the load really exceeded the KV cache
        assert sum(len(p.preempted) for p in plans) > 0
    if preemption == "swap":
        assert sum(p.swapped_out_tokens for p in plans) > 0
        assert sum(p.swapped_in_tokens for p in plans) > 0
    if mode == "continuous" and preemption == "recompute":
        assert sum(p.swapped_out_tokens + p.swapped_in_tokens for p in plans) == 0


@pytest.mark.parametrize(("mode", "extra"), MODES)
def test_replica_status_counts_work_at_admission(h, mode, extra):
    core = h.core(1024, mode=mode, **extra)
    core.add_request(h.request("a", 100, 30, max_tokens=20), 0.0)
    core.add_request(h.request("b", 50, 5), 0.0)
    st = core.status()
    assert st.pending_prefill_tokens == 150
    assert st.outstanding_output_tokens == 20 + 5
    assert (st.waiting, st.running) == (2, 0)


@pytest.mark.parametrize(("mode", "extra"), MODES)
def test_replica_pending_prefill_tokens_reach_zero_when_drained(h, mode, extra):
    core = h.core(1024, mode=mode, **extra)
    trace = h.drive(core, [h.request("a", 50, 5), h.request("b", 20, 3, arrival=0.01)])
    assert sorted(trace.finished) == ["a", "b"]
    assert core.status().outstanding_output_tokens == 0
    assert core.status().pending_prefill_tokens == 0


def test_replica_idle_core_plans_idle(h):
    core = h.core(1024)
    plan = core.schedule(3.0)
    assert plan.kind is StepKind.IDLE
    assert plan.duration_s == 0.0 and plan.chunks == []
