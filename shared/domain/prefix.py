"""A prompt's block-aligned prefix, as chained block hashes (what prefix caches key on).

vLLM's automatic prefix caching keys each full KV block of `block_size` tokens by a hash of the
block's tokens chained with the hash of the block before it, so block k matches only when the
whole prompt up to the end of block k is the same. `PromptPrefix` carries those hashes for one
request, so the scheduler (an approximate per-replica index) and the simulated engine (its
prefix cache) can count cached prefix blocks without ever seeing the prompt.

Sources of the hashes:
- token ids, where the request carries them: `from_token_ids`;
- the stand-in where it does not: the prompt as a list of *segments* (`from_segments`), each an
  opaque content id with a token length (a system prompt, a conversation turn). Two prompts
  share block k exactly when their segment lists agree over the first (k+1)·block_size tokens,
  which is what token-identical prefixes give. The simulator's workloads use segments; the live
  ingress can hash text segments the same way.

Only full blocks are hashed (a partial last block is never cached), and hashes are Python ints
from `hash()` of int tuples, which are deterministic across runs (no string hashing).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_BLOCK_SIZE_TOKENS = 16
"""vLLM's default KV block size."""


@dataclass(frozen=True, slots=True)
class PromptPrefix:
    """block_hashes[k]: chained hash of the prompt's tokens [0, (k+1)·block_size_tokens)."""

    block_size_tokens: int
    block_hashes: tuple[int, ...]
    completion_block_hashes: tuple[int, ...] = ()
    """Hashes of the full blocks of prompt + reply, the blocks an engine holds once the request
    finishes (vLLM caches generated tokens' blocks too). Known to the simulator, which plays the
    model (like Request.true_output_tokens); empty when unknown."""

    def __post_init__(self) -> None:
        if self.block_size_tokens < 1:
            raise ValueError(f"prefix.block_size_tokens must be >= 1, got {self.block_size_tokens}")

    @property
    def num_blocks(self) -> int:
        return len(self.block_hashes)

    @classmethod
    def from_token_ids(
        cls, token_ids: Sequence[int], block_size_tokens: int = DEFAULT_BLOCK_SIZE_TOKENS
    ) -> PromptPrefix:
        """Hashes of the full blocks of a tokenised prompt."""
        hashes: list[int] = []
        prev = 0
        for start in range(0, len(token_ids) - block_size_tokens + 1, block_size_tokens):
            prev = hash((prev, tuple(token_ids[start : start + block_size_tokens])))
            hashes.append(prev)
        return cls(block_size_tokens, tuple(hashes))

    @classmethod
    def from_segments(
        cls,
        segments: Sequence[tuple[int, int]],
        block_size_tokens: int = DEFAULT_BLOCK_SIZE_TOKENS,
        reply: tuple[int, int] | None = None,
    ) -> PromptPrefix:
        """Hashes of the full blocks of a prompt given as (content id, tokens) segments, and
        with `reply` (its segment) those of prompt + reply as completion_block_hashes.

        Block k's content is the list of (segment id, first offset, last offset) pieces that
        cover its tokens, so the hash depends on which segment tokens it holds, as token ids
        would. Chaining makes the prompt's blocks a prefix of the completion's.
        """
        if reply is not None:
            full = cls.from_segments([*segments, reply], block_size_tokens).block_hashes
            prompt_blocks = sum(n for _, n in segments) // block_size_tokens
            return cls(block_size_tokens, full[:prompt_blocks], full)
        hashes: list[int] = []
        prev = 0
        pieces: list[tuple[int, int, int]] = []
        filled = 0
        for seg_id, length in segments:
            if length < 0:
                raise ValueError(f"prefix segment {seg_id}: length must be >= 0, got {length}")
            offset = 0
            while offset < length:
                take = min(length - offset, block_size_tokens - filled)
                pieces.append((seg_id, offset, offset + take))
                offset += take
                filled += take
                if filled == block_size_tokens:
                    prev = hash((prev, tuple(pieces)))
                    hashes.append(prev)
                    pieces = []
                    filled = 0
        return cls(block_size_tokens, tuple(hashes))


def cacheable_tokens(prefix: PromptPrefix, matched_blocks: int, input_tokens: int) -> int:
    """Prompt tokens a hit on `matched_blocks` leading blocks saves: vLLM always computes at
    least the last prompt token (it needs its logits), so at most input_tokens - 1."""
    return max(0, min(matched_blocks * prefix.block_size_tokens, input_tokens - 1))
