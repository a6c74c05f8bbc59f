"""`ignore_eos` and exact-length prompts through the live mesh, on the real vLLM replica."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

TINY = "tiny-llama"


def _prompt_builder(live_mesh: dict[str, Any]) -> Any:
    from transformers import AutoTokenizer

    from services.replica.vllm.tiny_model import _SYLLABLES_TEXT, _WORDS_TEXT
    from slomesh.bench.agree.prompts import PromptBuilder

    ingress = next(a for a in live_mesh["config"]["applications"] if a["name"] == "ingress")
    path = next(m["tokenizer"] for m in ingress["args"]["models"] if m["name"] == TINY)
    tok = AutoTokenizer.from_pretrained(path)
    return PromptBuilder(lambda s: tok(s)["input_ids"], f"{_WORDS_TEXT} {_SYLLABLES_TEXT}".split())


@pytest.mark.parametrize(("prompt_tokens", "max_tokens"), [(7, 1), (40, 9), (300, 33)])
def test_ignore_eos_forces_the_output_length_on_vllm(
    live_mesh: dict[str, Any], prompt_tokens: int, max_tokens: int
) -> None:
    """Sampled at temperature 2 (EOS may come up), the output still runs to max_tokens, and
    the exact-length prompt is counted as that many tokens."""
    prompt = _prompt_builder(live_mesh).build(prompt_tokens, seed=prompt_tokens)
    body = {
        "model": TINY,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "temperature": 2.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with httpx.stream("POST", f"{live_mesh['http']}/completions", json=body, timeout=120) as r:
        assert r.status_code == 200
        events = [ln[6:] for ln in r.iter_lines() if ln.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    usage = chunks[-1]["usage"]
    assert usage["completion_tokens"] == max_tokens
    assert usage["prompt_tokens"] == prompt_tokens
    reasons = [c["choices"][0]["finish_reason"] for c in chunks if c.get("choices")]
    assert reasons[-1] == "length"


def test_ignore_eos_of_the_wrong_type_is_vllms_400_naming_it(live_mesh: dict[str, Any]) -> None:
    body = {"model": TINY, "prompt": "hello", "max_tokens": 2, "ignore_eos": [1]}
    r = httpx.post(f"{live_mesh['http']}/completions", json=body, timeout=30)
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["param"] == "body.ignore_eos" and "boolean" in err["message"]
