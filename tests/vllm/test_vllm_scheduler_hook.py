"""The scheduler hook's policy queue and request metadata, on stand-ins for vLLM's Request.

The end-to-end check (the hook reordering a real vLLM engine) is in test_vllm_engine.py.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from services.replica.vllm.slo_metadata import request_metadata
from shared.domain import SLO, Request, VirtualClock
from shared.domain.engine_metadata import EXTRA_ARGS_KEY

pytest.importorskip("vllm")


def vllm_request(
    rid: str, *, arrival: float, deadline_s: float | None = None, priority: int = 0
) -> Any:
    """Duck-typed vllm.v1.request.Request: the attributes the hook reads."""
    meta = None
    if deadline_s is not None:
        meta = {EXTRA_ARGS_KEY: {"arrival_wall_s": arrival, "ttft_deadline_s": deadline_s}}
    return SimpleNamespace(
        request_id=rid,
        sampling_params=SimpleNamespace(extra_args=meta),
        num_prompt_tokens=10,
        max_tokens=20,
        num_output_tokens=0,
        priority=priority,
        arrival_time=arrival,
    )


def queue_for(policy: str, now: float = 1000.0) -> Any:
    from services.replica.core.queue_policies import QUEUE_POLICIES
    from services.replica.vllm.scheduler_hook import PolicyRequestQueue

    return PolicyRequestQueue(QUEUE_POLICIES.create(policy), now=lambda: now)


def drain(queue: Any) -> list[str]:
    return [queue.pop_request().request_id for _ in range(len(queue))]


def test_edf_orders_by_deadline_and_fcfs_by_arrival() -> None:
    reqs = [
        vllm_request("loose", arrival=1.0, deadline_s=50.0),
        vllm_request("tight", arrival=2.0, deadline_s=1.0),
        vllm_request("middle", arrival=3.0, deadline_s=10.0),
    ]
    edf, fcfs = queue_for("edf"), queue_for("fcfs")
    for r in reqs:
        edf.add_request(r)
        fcfs.add_request(r)
    assert [r.request_id for r in edf] == ["tight", "middle", "loose"]
    assert edf.peek_request().request_id == "tight"
    assert drain(edf) == ["tight", "middle", "loose"]
    assert drain(fcfs) == ["loose", "tight", "middle"]
    assert not edf and len(edf) == 0
    with pytest.raises(IndexError):
        edf.peek_request()


def test_priority_policy_and_removal() -> None:
    q = queue_for("priority")
    a, b, c = (
        vllm_request(n, arrival=t, priority=p)
        for n, t, p in [("a", 1, 5), ("b", 2, 0), ("c", 3, 0)]
    )
    q.prepend_requests([a, b, c])  # "prepending" re-enters by key
    q.remove_request(b)
    q.remove_requests([vllm_request("unknown", arrival=0.0)])
    assert len(q) == 2 and drain(q) == ["c", "a"]


def test_oracle_edf_demotes_a_lost_request() -> None:
    q = queue_for("oracle-edf", now=100.0)
    q.add_request(vllm_request("lost", arrival=0.0, deadline_s=1.0))  # deadline passed
    q.add_request(vllm_request("alive", arrival=0.0, deadline_s=500.0))
    assert drain(q) == ["alive", "lost"]


def test_request_metadata_puts_times_on_the_wall_clock() -> None:
    clock = VirtualClock(10.0)
    req = Request("r", "m", 8, 16, arrival_s=7.0, slo=SLO(ttft_deadline_s=2.5), priority=3)
    meta = request_metadata(req, clock, wall_now_s=5000.0)
    assert meta["arrival_wall_s"] == 4997.0 and meta["ttft_deadline_s"] == 2.5
    assert meta["priority"] == 3 and meta["first_token_emitted"] is False
    before = time.time()
    arrival = request_metadata(req, clock)["arrival_wall_s"]  # default: the real wall clock
    after = time.time()
    assert before - 3.0 <= arrival <= after - 3.0
