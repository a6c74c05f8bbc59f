"""Shared-prefix workloads: block hashes of prompts, conversations re-sending their history."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from shared.domain.prefix import PromptPrefix, cacheable_tokens
from shared.workloads import LengthSpec, StreamSpec, WorkloadSpec, generate
from shared.workloads.conversations import ConversationSpec, conversation_prompts

B = 16


@pytest.mark.parametrize(
    ("a", "b", "shared"),
    [
        ([(1, 64)], [(1, 64), (2, 10)], 4),
        ([(1, 40), (2, 40)], [(1, 40), (3, 40)], 2),  # block 2 mixes segments 1 and 2/3
        ([(1, 64)], [(9, 64)], 0),
        ([(1, 30)], [(1, 30)], 1),  # 30 tokens: one full block, the partial one is not hashed
        ([(1, 16), (2, 16)], [(1, 16), (3, 16), (2, 16)], 1),  # chained: order matters
    ],
)
def test_workloads_prefix_segments_share_leading_blocks(a, b, shared):
    pa, pb = PromptPrefix.from_segments(a, B), PromptPrefix.from_segments(b, B)
    assert pa.num_blocks == sum(n for _, n in a) // B
    common = 0
    for x, y in zip(pa.block_hashes, pb.block_hashes, strict=False):
        if x != y:
            break
        common += 1
    assert common == shared


def test_workloads_prefix_token_ids_and_reply_blocks():
    t = PromptPrefix.from_token_ids(list(range(40)), B)
    assert t.num_blocks == 2
    assert PromptPrefix.from_token_ids([*list(range(32)), 7], B).block_hashes == t.block_hashes
    p = PromptPrefix.from_segments([(1, 40)], B, reply=(2, 30))
    assert len(p.completion_block_hashes) == 70 // B
    assert p.completion_block_hashes[: p.num_blocks] == p.block_hashes
    assert cacheable_tokens(p, 2, 40) == 32
    assert cacheable_tokens(p, 2, 32) == 31  # the last prompt token is always computed
    with pytest.raises(ValueError, match="block_size_tokens"):
        PromptPrefix(0, ())


def test_workloads_conversation_turns_extend_the_previous_turn():
    spec = ConversationSpec(
        system_prompts=2, system_prompt_tokens=100, turns_min=3, turns_max=3,
        concurrent_conversations=1,
    )  # fmt: skip
    outputs = np.array([20, 30, 40, 50], dtype=np.int64)
    inputs, prefixes = conversation_prompts(spec, outputs, 8192, np.random.default_rng(0))
    # one conversation: turn k+1 re-sends turn k's prompt and reply, then a new message
    for k in (0, 1):
        nxt = prefixes[k + 1].block_hashes
        done = prefixes[k].completion_block_hashes
        assert nxt[: len(done)] == done
        assert inputs[k + 1] > inputs[k] + outputs[k]
    # three turns, then a new conversation: only the system prompt may be shared
    assert inputs[3] <= 100 + spec.user_tokens_max
    common = 0
    for x, y in zip(prefixes[3].block_hashes, prefixes[2].block_hashes, strict=False):
        if x != y:
            break
        common += 1
    assert common <= 100 // B


def test_workloads_conversation_stream_is_seeded_and_bounded():
    stream = StreamSpec(
        name="chat",
        slo_class="chat",
        models=["m"],
        rate_rps=5.0,
        lengths=LengthSpec(max_input_tokens=3000, max_tokens=512),
        conversations=ConversationSpec(concurrent_conversations=4, turns_max=20),
    )
    spec = WorkloadSpec(streams=[stream], requests=300)
    a, b = generate(spec, 3), generate(spec, 3)
    assert [r.input_tokens for r in a] == [r.input_tokens for r in b]
    assert [r.prefix for r in a] == [r.prefix for r in b]
    assert all(r.prefix is not None and 1 <= r.input_tokens <= 3000 for r in a)
    assert all(r.prefix.num_blocks == r.input_tokens // B for r in a)
    plain = WorkloadSpec(streams=[stream.model_copy(update={"conversations": None})], requests=5)
    assert all(r.prefix is None for r in generate(plain, 0))


@pytest.mark.parametrize(
    ("field", "value"),
    [("turns_min", 9), ("user_tokens_min", 500), ("system_prompts", 0)],
)
def test_workloads_conversation_spec_rejects_bad_ranges(field, value):
    with pytest.raises(ValidationError, match=field):
        ConversationSpec(**{field: value})
