"""Admission checks of the engine core: requests that can never fit the KV cache are refused."""

from __future__ import annotations

import pytest

from shared.domain.engine import RequestTooLarge


@pytest.mark.parametrize(
    ("input_tokens", "max_tokens", "true_tokens", "fits"),
    [
        (200, 56, 56, True),  # exactly the capacity (256 tokens = 16 blocks of 16)
        (1, 255, 255, True),
        (200, 57, 3, False),  # max_tokens counts, not the (unknown to users) true length
        (256, 1, 1, False),
        (1000, 10, 10, False),
    ],
)
def test_replica_request_too_large(h, input_tokens, max_tokens, true_tokens, fits):
    core = h.core(256, block_size_tokens=16)
    req = h.request("r", input_tokens, true_tokens, max_tokens=max_tokens)
    if not fits:
        with pytest.raises(RequestTooLarge, match=r"exceeds the KV capacity .* \(256 tokens\)"):
            core.add_request(req, 0.0)
        assert not core.planner.state.seqs and not core.has_work
        assert core.status().pending_prefill_tokens == 0
        assert core.status().outstanding_output_tokens == 0
        return
    trace = h.drive(core, [req])
    assert trace.finished["r"].num_output_tokens == true_tokens


def test_replica_request_too_large_is_a_value_error():
    assert issubclass(RequestTooLarge, ValueError)


def test_replica_duplicate_request_id_refused(h):
    core = h.core(1024)
    core.add_request(h.request("r", 5, 5), 0.0)
    with pytest.raises(ValueError, match="'r' already in engine"):
        core.add_request(h.request("r", 5, 5), 0.0)
    assert core.status().waiting == 1


def test_replica_admitted_request_can_always_finish(h):
    core = h.core(100, block_size_tokens=16)  # 6 blocks = 96 tokens usable
    try:
        core.add_request(h.request("r", 50, 50), 0.0)
    except RequestTooLarge:
        return  # refusing it is a correct outcome too
    trace = h.drive(core)
    assert "r" in trace.finished, f"engine idles with work left: {core.status()}"
