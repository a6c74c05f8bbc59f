"""Tokenizers of the served models that name one (exact prompt token counts, chat templates).

Admission counts every prompt's tokens. Hugging Face's tokenizer call wraps the Rust
tokenizer in Python bookkeeping (a BatchEncoding, padding and truncation checks) that costs
more than the encoding of a short prompt, so `PromptTokenizer.encode_ids` asks the Rust
tokenizer itself, once the two were seen to agree on probe texts at load (with and without
special tokens); a tokenizer whose Python side changes the ids keeps the full call.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from services.ingress.args import ServedModel

_PROBES = ("Hello there", " two  spaces\nand a line", "ünïcödé — 数字 123", "")


class PromptTokenizer:
    """A Hugging Face tokenizer (every attribute passes through) with `encode_ids`."""

    def __init__(self, hf: Any) -> None:
        self.hf = hf
        backend = getattr(hf, "backend_tokenizer", None)
        self._backend = backend if backend is not None and _agrees(hf, backend) else None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.hf, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.hf(*args, **kwargs)

    def encode_ids(self, text: str, add_special_tokens: bool) -> list[int]:
        """The ids `hf(text, add_special_tokens=...)["input_ids"]` gives."""
        if self._backend is not None:
            return list(self._backend.encode(text, add_special_tokens=add_special_tokens).ids)
        return list(self.hf(text, add_special_tokens=add_special_tokens)["input_ids"])


def _agrees(hf: Any, backend: Any) -> bool:
    try:
        return all(
            list(backend.encode(t, add_special_tokens=s).ids)
            == list(hf(t, add_special_tokens=s)["input_ids"])
            for t in _PROBES
            for s in (True, False)
        )
    except Exception:
        return False


def load_tokenizers(models: Iterable[ServedModel]) -> dict[str, Any]:
    """model name -> its tokenizer (PromptTokenizer), for the models with `tokenizer` set."""
    out: dict[str, Any] = {}
    for m in models:
        if m.tokenizer:
            from transformers import AutoTokenizer

            hf = AutoTokenizer.from_pretrained(str(Path(m.tokenizer).expanduser()))
            out[m.name] = PromptTokenizer(hf)
    return out
