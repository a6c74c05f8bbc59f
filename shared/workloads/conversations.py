"""Prompts with shared prefixes: shared system prompts and multi-turn conversations.

A stream with a `ConversationSpec` turns its arrivals into turns of conversations:
- `concurrent_conversations` conversations are open at once; each arrival is the next turn of one
  of them, picked uniformly (so a conversation's turns come about concurrent/rate seconds apart);
- a conversation starts with one of `system_prompts` system prompts (uniform), each
  `system_prompt_tokens` long, and lasts a uniform number of turns in [turns_min, turns_max];
- each turn adds a user message (uniform in [user_tokens_min, user_tokens_max] tokens); its prompt
  is the system prompt, every earlier message and reply (the history, re-sent as chat APIs do) and
  the new message; its reply length is the stream's sampled output length;
- a turn whose prompt would exceed the stream's max_input_tokens ends that conversation and opens
  a new one in its place.
Prompts are described by segments (content id, tokens), hashed into block-aligned prefixes
(shared/domain/prefix.py), so a turn shares every block of the previous turn's prompt.
Draws come from the stream's generator after its lengths and models (seeded, no global RNG).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Self

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from shared.domain.prefix import DEFAULT_BLOCK_SIZE_TOKENS, PromptPrefix


class ConversationSpec(BaseModel):
    """How a stream's requests share prefixes (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    system_prompts: int = Field(8, ge=1, description="Distinct system prompts.")
    system_prompt_tokens: int = Field(1000, ge=0, description="Tokens of each system prompt.")
    turns_min: int = Field(1, ge=1, description="Fewest turns of a conversation.")
    turns_max: int = Field(8, ge=1, description="Most turns of a conversation.")
    user_tokens_min: int = Field(50, ge=1, description="Smallest user message, tokens.")
    user_tokens_max: int = Field(400, ge=1, description="Largest user message, tokens.")
    concurrent_conversations: int = Field(
        64, ge=1, description="Conversations open at once (the arrivals are spread over them)."
    )
    block_size_tokens: int = Field(
        DEFAULT_BLOCK_SIZE_TOKENS, ge=1, description="Tokens per hashed prefix block."
    )

    @model_validator(mode="after")
    def _ranges(self) -> Self:
        if self.turns_min > self.turns_max:
            raise ValueError(f"turns_min must be <= turns_max, got {self.turns_min}")
        if self.user_tokens_min > self.user_tokens_max:
            raise ValueError(
                f"user_tokens_min must be <= user_tokens_max, got {self.user_tokens_min}"
            )
        return self


@dataclass
class _Conversation:
    segments: list[tuple[int, int]]
    turns_left: int
    tokens: int = field(init=False)

    def __post_init__(self) -> None:
        self.tokens = sum(n for _, n in self.segments)


def conversation_prompts(
    spec: ConversationSpec,
    outputs: np.ndarray,
    max_input_tokens: int,
    rng: np.random.Generator,
    stream_index: int = 0,
) -> tuple[list[int], list[PromptPrefix]]:
    """Input tokens and prefix of each of len(outputs) arrivals, in arrival order."""
    counter = 0

    def new_id() -> int:  # content ids, unique per stream; system prompts are 1..K
        nonlocal counter
        counter += 1
        return hash((stream_index, counter)) & ((1 << 62) - 1) | (1 << 62)

    def open_one() -> _Conversation:
        sys_id = int(rng.integers(1, spec.system_prompts + 1))
        turns = int(rng.integers(spec.turns_min, spec.turns_max + 1))
        segs = [(sys_id, spec.system_prompt_tokens)] if spec.system_prompt_tokens else []
        return _Conversation(segs, turns)

    slots = [open_one() for _ in range(spec.concurrent_conversations)]
    inputs: list[int] = []
    prefixes: list[PromptPrefix] = []
    for out in outputs.tolist():
        j = int(rng.integers(0, len(slots)))
        user = int(rng.integers(spec.user_tokens_min, spec.user_tokens_max + 1))
        conv = slots[j]
        if conv.tokens + user > max_input_tokens:
            conv = slots[j] = open_one()
        segments = [*conv.segments, (new_id(), min(user, max_input_tokens - conv.tokens))]
        tokens = conv.tokens + segments[-1][1]
        inputs.append(max(1, tokens))
        reply = (new_id(), int(out))
        prefixes.append(PromptPrefix.from_segments(segments, spec.block_size_tokens, reply))
        conv.segments = [*segments, reply]
        conv.tokens = tokens + int(out)
        conv.turns_left -= 1
        if conv.turns_left <= 0:
            slots[j] = open_one()
    return inputs, prefixes
