"""Reading the llm-responses data sets into LengthExamples (the only module here that reads them).

Three sets under one directory (default: ../shared/data/llm-responses beside the repo root):

- arena-hard-auto_pairs.jsonl.gz: one line per (prompt, model, response); empty responses dropped.
- gsm8k_example_model_solutions.jsonl.gz: one line per math question with four GPT-3 solutions
  (6b/175b x finetuning/verification); each solution is one example, model "gpt3-<variant>".
- fastchat-eval/: question.jsonl joined on question_id with each answer_<model>.jsonl; the model
  is the file name without "answer_".

Lengths (prompt and answer) are counted with dataset.approx_tokens (words x 1.3) for every row;
the tenant is the data set's name ("arena-hard", "gsm8k", "fastchat").
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from services.predictor.core.learned.dataset import LengthExample, approx_tokens

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATA_DIR = REPO_ROOT.parent / "shared" / "data" / "llm-responses"
"""../shared/data/llm-responses relative to the repo root."""

ARENA_FILE = "arena-hard-auto_pairs.jsonl.gz"
GSM8K_FILE = "gsm8k_example_model_solutions.jsonl.gz"
FASTCHAT_DIR = "fastchat-eval"
GSM8K_VARIANTS = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for i, line in enumerate(f, start=1):
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{i}: not JSON: {e}") from e
                yield i, row


def _example(prompt: str, response: str, model: str, tenant: str) -> LengthExample | None:
    if not response.strip() or not prompt.strip():
        return None
    return LengthExample(
        prompt=prompt,
        model=model,
        input_tokens=approx_tokens(prompt),
        output_tokens=approx_tokens(response),
        tenant=tenant,
    )


def load_arena_hard(path: Path) -> list[LengthExample]:
    out = []
    for _, row in _lines(path):
        ex = _example(
            str(row["prompt"]), str(row.get("response") or ""), str(row["model"]), "arena-hard"
        )
        if ex is not None:
            out.append(ex)
    return out


def load_gsm8k(path: Path) -> list[LengthExample]:
    out = []
    for _, row in _lines(path):
        for variant in GSM8K_VARIANTS:
            sol = row.get(variant)
            if isinstance(sol, dict):
                ex = _example(
                    str(row["question"]), str(sol.get("solution") or ""), f"gpt3-{variant}", "gsm8k"
                )
                if ex is not None:
                    out.append(ex)
    return out


def load_fastchat(directory: Path) -> list[LengthExample]:
    questions = {
        int(r["question_id"]): str(r["text"]) for _, r in _lines(directory / "question.jsonl")
    }
    out = []
    for path in sorted(directory.glob("answer_*.jsonl")):
        model = path.stem.removeprefix("answer_")
        for i, row in _lines(path):
            qid = int(row["question_id"])
            if qid not in questions:
                raise ValueError(f"{path}:{i}: question_id {qid} is not in question.jsonl")
            ex = _example(questions[qid], str(row.get("text") or ""), model, "fastchat")
            if ex is not None:
                out.append(ex)
    return out


def load_llm_responses(data_dir: Path | str | None = None) -> list[LengthExample]:
    """All three sets, in a fixed order (arena-hard, gsm8k, fastchat)."""
    root = Path(data_dir) if data_dir is not None else DEFAULT_DATA_DIR
    if not root.is_dir():
        raise ValueError(f"data dir {root} does not exist (pass --data DIR)")
    return [
        *load_arena_hard(root / ARENA_FILE),
        *load_gsm8k(root / GSM8K_FILE),
        *load_fastchat(root / FASTCHAT_DIR),
    ]
