"""Prompt prefix hashes made at the ingress, and their trip through RequestMeta to the scheduler."""

from __future__ import annotations

import pytest

from services.ingress.core.prompt_prefix import prompt_prefix, with_prompt_prefix
from shared.domain import SLO, Request
from shared.rpc.convert import request_from_meta, request_to_meta

SYSTEM = "You are a helpful assistant. " * 20  # 580 bytes: 145 stand-in tokens, 9 blocks


def common_blocks(a, b) -> int:
    n = 0
    for x, y in zip(a.block_hashes, b.block_hashes, strict=False):
        if x != y:
            break
        n += 1
    return n


@pytest.mark.parametrize(
    ("first", "second", "shared"),
    [
        (SYSTEM + "What is 2+2?", SYSTEM + "Tell me a joke.", 580 // 64),
        (SYSTEM, SYSTEM + " and more", 580 // 64),
        ("A" + SYSTEM, SYSTEM, 0),  # a different first byte changes every chained block
        ("short", "short", 0),  # under one block: nothing to share
    ],
)
def test_ingress_stand_in_prefix_shares_the_common_start(first, second, shared):
    a, b = prompt_prefix(first), prompt_prefix(second)
    got = 0 if a is None or b is None else common_blocks(a, b)
    assert got == shared


def test_ingress_prefix_uses_token_ids_when_a_tokenizer_is_there():
    def tokenizer(text: str) -> dict[str, list[int]]:
        return {"input_ids": [ord(c) for c in text]}

    req = Request("r", "m", 40, 8, 0.0, SLO(1.0))
    with_ids = with_prompt_prefix(req, "x" * 40, tokenizer)
    assert with_ids.prefix is not None and with_ids.prefix.num_blocks == 40 // 16
    assert with_prompt_prefix(req, "", tokenizer) is req


def test_ingress_prefix_travels_in_request_meta():
    req = with_prompt_prefix(Request("r", "m", 200, 8, 0.0, SLO(1.0)), SYSTEM * 2)
    assert req.prefix is not None
    back = request_from_meta(request_to_meta(req))
    assert back.prefix is not None
    assert back.prefix.block_size_tokens == req.prefix.block_size_tokens
    assert back.prefix.num_blocks == req.prefix.num_blocks
    # hashes travel as uint64: the same prompt always maps to the same wire hashes
    again = request_from_meta(request_to_meta(req))
    assert again.prefix == back.prefix
    plain = request_from_meta(request_to_meta(Request("q", "m", 5, 8, 0.0, SLO(1.0))))
    assert plain.prefix is None
