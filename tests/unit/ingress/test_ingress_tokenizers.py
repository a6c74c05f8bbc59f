"""The ingress's prompt tokenizer: its cheap path (the Rust tokenizer itself) gives the ids of
Hugging Face's full call, with and without special tokens, and a tokenizer whose Python side
changes the ids keeps the full call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from services.ingress.core.request_view import prompt_text, read_view
from services.ingress.tokenizers import PromptTokenizer


@pytest.fixture(scope="module")
def hf(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from transformers import AutoTokenizer

    from services.replica.vllm.tiny_model import build_tiny_model

    path = build_tiny_model(Path(tmp_path_factory.mktemp("tiny")) / "tiny-llama")
    return AutoTokenizer.from_pretrained(str(path))


@pytest.mark.parametrize(
    "text", ["measure the first token", "  spaces\n\tand tabs ", "数字 ü 42", ""]
)
@pytest.mark.parametrize("special", [True, False])
def test_cheap_ids_are_the_full_calls(hf: Any, text: str, special: bool) -> None:
    tok = PromptTokenizer(hf)
    assert tok._backend is not None  # the tiny model's tokenizer agrees: the cheap path is on
    assert tok.encode_ids(text, special) == list(hf(text, add_special_tokens=special)["input_ids"])


def test_prompt_text_counts_the_same_through_either(hf: Any) -> None:
    body = {"messages": [{"role": "user", "content": "hello there"}], "model": "m"}
    view = read_view("/v1/chat/completions", body, "m")
    assert prompt_text(view, PromptTokenizer(hf)) == prompt_text(view, hf)
    completion = read_view("/v1/completions", {"prompt": "hello there"}, "m")
    assert prompt_text(completion, PromptTokenizer(hf)) == prompt_text(completion, hf)


def test_a_tokenizer_whose_python_side_differs_keeps_the_full_call(hf: Any) -> None:
    class Shifted:
        backend_tokenizer = hf.backend_tokenizer

        def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
            ids = hf(text, add_special_tokens=add_special_tokens)["input_ids"]
            return {"input_ids": [i + 1 for i in ids]}

    tok = PromptTokenizer(Shifted())
    assert tok._backend is None
    assert tok.encode_ids("hi", True) == [i + 1 for i in hf("hi")["input_ids"]]
