"""An engine lists its waiting requests in its status only when asked to
(`report_waiting_prefill`, the stack's deadline-aware TTFT guard) and only on an
earliest-deadline-first queue; otherwise its status counts them and nothing more."""

from __future__ import annotations

import pytest

from services.replica.vllm.engine_client import SLOEngineClient
from tests.unit.replica.conftest import make_core, make_request


@pytest.mark.parametrize(
    ("queue_policy", "report", "listed"),
    [("edf", True, True), ("edf", False, False), ("fcfs", True, False)],
)
def test_sim_engine_lists_waiting_requests_only_when_asked_on_an_edf_queue(
    queue_policy: str, report: bool, listed: bool
) -> None:
    core = make_core(queue_policy=queue_policy, report_waiting_prefill=report)
    core.add_request(make_request("a", 100, 4, ttft=2.0), 0.0)
    core.add_request(make_request("b", 50, 4, ttft=1.0), 0.0)
    st = core.status()
    assert (st.waiting, st.pending_prefill_tokens) == (2, 150)
    assert st.deadline_ordered == (queue_policy == "edf")
    expected = {(2.0, 100), (1.0, 50)} if listed else set()
    assert set(st.waiting_prefill) == expected


class _LLM:
    pass


@pytest.mark.parametrize(
    ("ordered", "list_waiting", "listed"),
    [(True, True, True), (True, False, False), (False, True, False)],
)
def test_vllm_client_lists_waiting_requests_only_when_asked_on_an_edf_queue(
    ordered: bool, list_waiting: bool, listed: bool
) -> None:
    client = SLOEngineClient(_LLM(), deadline_ordered=ordered, list_waiting=list_waiting)
    waiting = client.follow("w")
    waiting.prompt_tokens, waiting.ttft_deadline_unix_s = 11, 5.0
    st = client.status("m")
    assert (st.waiting, st.pending_prefill_tokens, st.deadline_ordered) == (1, 11, ordered)
    assert st.waiting_prefill == (((5.0, 11),) if listed else ())
