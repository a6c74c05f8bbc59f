"""Examples for the learned length predictor: one prompt with one model's answer, and the split.

Token counts: every length here (prompt and answer, training and evaluation alike) is counted with
one tokenizer, `words x 1.3` (`approx_tokens`): whitespace-separated words times 1.3, rounded, at
least 1. Only some arena-hard rows carry real token counts (token_len), so using them would mix two
tokenizers; one approximation for every row keeps train and eval on the same scale.

The train/test split is by prompt: a prompt's hash (salted with the seed) decides its side, so every
answer to one prompt (from any model) lands on the same side and no prompt is in both.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from shared.domain import SLO, Request

TOKENIZER = "words-x1.3"
"""Name of the token count used for every length (recorded in the model file)."""

WORDS_TO_TOKENS = 1.3
"""Tokens per whitespace-separated word."""


def approx_tokens(text: str) -> int:
    """Token count of `text` under TOKENIZER: round(1.3 x words), at least 1."""
    return max(1, round(WORDS_TO_TOKENS * len(text.split())))


@dataclass(frozen=True, slots=True)
class LengthExample:
    """One request with its true output length (tokens counted with TOKENIZER).

    prompt: the prompt text ("" when unknown). model: the model that answered. input_tokens,
    output_tokens: prompt and answer lengths, >= 1. tenant: the application it came from (the
    data set's name in the shipped data). slo_class: the SLO class ("default" in the shipped data).
    """

    prompt: str
    model: str
    input_tokens: int
    output_tokens: int
    tenant: str = "default"
    slo_class: str = "default"

    def __post_init__(self) -> None:
        if self.input_tokens < 1:
            raise ValueError(f"example.input_tokens must be >= 1, got {self.input_tokens}")
        if self.output_tokens < 1:
            raise ValueError(f"example.output_tokens must be >= 1, got {self.output_tokens}")


def prompt_unit(prompt: str, seed: int, salt: str = "") -> float:
    """A number in [0, 1) fixed by (seed, salt, prompt): the prompt's place in a split."""
    digest = hashlib.blake2b(f"{seed}:{salt}:{prompt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


def split_by_prompt(
    examples: Sequence[LengthExample], test_fraction: float, seed: int, salt: str = "test"
) -> tuple[list[LengthExample], list[LengthExample]]:
    """(train, test): a prompt goes to test when its unit value is below test_fraction.

    Every example of one prompt lands on the same side; order within each side is kept.
    A different `salt` gives an independent split (e.g. a validation split carved from train).
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    train: list[LengthExample] = []
    test: list[LengthExample] = []
    for ex in examples:
        (test if prompt_unit(ex.prompt, seed, salt) < test_fraction else train).append(ex)
    return train, test


def split_folds(
    examples: Sequence[LengthExample], folds: int, seed: int, salt: str = "fold"
) -> list[list[LengthExample]]:
    """`folds` disjoint parts by prompt (a prompt's unit value picks its part); order kept."""
    if folds < 2:
        raise ValueError(f"folds must be >= 2, got {folds}")
    parts: list[list[LengthExample]] = [[] for _ in range(folds)]
    for ex in examples:
        parts[min(int(prompt_unit(ex.prompt, seed, salt) * folds), folds - 1)].append(ex)
    return parts


def examples_digest(examples: Sequence[LengthExample]) -> str:
    """Hex digest (16 chars) of the examples, order included: names a training set."""
    h = hashlib.blake2b(digest_size=8)
    for ex in examples:
        fields = (ex.prompt, ex.model, ex.tenant, ex.slo_class)
        h.update("\x1f".join(fields).encode())
        h.update(f"\x1f{ex.input_tokens}\x1f{ex.output_tokens}\x1e".encode())
    return h.hexdigest()


def example_request(example: LengthExample, index: int, max_tokens: int) -> Request:
    """The Request an example stands for (id "example-<index>", arrival 0, a 1 s TTFT SLO)."""
    return Request(
        request_id=f"example-{index}",
        model=example.model,
        input_tokens=example.input_tokens,
        max_tokens=max_tokens,
        arrival_s=0.0,
        slo=SLO(ttft_deadline_s=1.0, class_name=example.slo_class),
        tenant=example.tenant,
    )
