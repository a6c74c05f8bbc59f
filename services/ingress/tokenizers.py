"""Tokenizers of the served models that name one (exact prompt token counts, chat templates)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from services.ingress.args import ServedModel


def load_tokenizers(models: Iterable[ServedModel]) -> dict[str, Any]:
    """model name -> its Hugging Face tokenizer, for the models with `tokenizer` set."""
    out: dict[str, Any] = {}
    for m in models:
        if m.tokenizer:
            from transformers import AutoTokenizer

            out[m.name] = AutoTokenizer.from_pretrained(str(Path(m.tokenizer).expanduser()))
    return out
