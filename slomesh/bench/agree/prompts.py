"""Text prompts of an exact token count under a given tokenizer.

The ingress takes text, so a replayed request's prompt length is exact only if its text
tokenizes to that many tokens. A word qualifies when it is one token both alone and after a
space (byte-level BPE never merges across the space); a prompt of n tokens is then n - s such
words (s: the special tokens the tokenizer adds, the BOS of the tiny model), drawn with the
request's own seed so prompts differ (no accidental prefix-cache sharing between requests).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence

Encode = Callable[[str], Sequence[int]]
"""Text -> token ids as the server counts them (special tokens included)."""


def single_token_words(encode: Encode, candidates: Iterable[str]) -> list[str]:
    """The candidates that are one token alone and one token per repeat after a space."""
    base = len(encode(""))
    out: list[str] = []
    for w in dict.fromkeys(c.strip() for c in candidates):
        if w and len(encode(w)) == base + 1 and len(encode(f"{w} {w} {w}")) == base + 3:
            out.append(w)
    return out


def exact_prompt(words: Sequence[str], tokens: int, special_tokens: int, seed: int) -> str:
    """A prompt of `tokens` tokens: `tokens - special_tokens` seeded picks from `words`."""
    if not words:
        raise ValueError("words must not be empty")
    n = tokens - special_tokens
    if n < 1:
        raise ValueError(f"tokens must be > {special_tokens} (the special tokens), got {tokens}")
    rng = random.Random(seed)
    return " ".join(rng.choice(words) for _ in range(n))


class PromptBuilder:
    """Exact-length prompts for one tokenizer, each checked against it."""

    def __init__(self, encode: Encode, candidates: Iterable[str]) -> None:
        self._encode = encode
        self.special_tokens = len(encode(""))
        self.words = single_token_words(encode, candidates)
        if len(self.words) < 2:
            raise ValueError("the tokenizer has fewer than 2 single-token words among candidates")

    def build(self, tokens: int, seed: int) -> str:
        text = exact_prompt(self.words, tokens, self.special_tokens, seed)
        got = len(self._encode(text))
        if got != tokens:
            raise ValueError(f"prompt of {tokens} tokens came out as {got} under the tokenizer")
        return text
