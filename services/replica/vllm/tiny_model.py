"""A tiny random-weight Llama with a locally trained tokenizer, for running real vLLM on CPU.

Nothing is downloaded: a byte-level BPE tokenizer is trained with `tokenizers` on a corpus generated
here from a seeded word list, and a `LlamaForCausalLM` gets random weights from a seeded local
`torch.Generator`. The output is an ordinary Hugging Face checkpoint directory (safetensors), so
vLLM loads it through the same code path as a real model.

The model's output-embedding rows of the special tokens are zero, so their logit is exactly 0 while
the ~2000 others are random: greedy decoding never picks EOS, and a request runs to max_tokens
(finish_reason "length"). That makes lengths deterministic for tests; sampling with temperature > 0
can still, rarely, end on EOS.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

METADATA_FILE = "slomesh_tiny_model.json"
MODEL_CACHE_ENV = "SLOMESH_MODEL_CACHE"
SPECIAL_TOKENS = ("<pad>", "<s>", "</s>")
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}{{ eos_token }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
_FORMAT_VERSION = 1
_REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
_WORDS_TEXT = (
    "the a an of to in on for with from by at as is are was be been request token model serve "
    "queue deadline latency batch prefill decode cache block memory replica engine schedule "
    "policy priority first time output input prompt stream chunk finish abort evict resume "
    "mesh ray vllm llama tiny random weight tokenizer seed corpus word sentence hello world "
    "user assistant system answer question please thanks yes no one two three four five fast "
    "slow small large early late ready wait run stop go send read write open close"
)
_SYLLABLES_TEXT = "ka lo mi nu pe ra si to vu xe zo ban cor del fin gar hul jin kem lor mar nis"


def default_tiny_model_dir() -> Path:
    """Where the tiny model is cached: $SLOMESH_MODEL_CACHE/tiny-llama (read at call time), else
    ~/.cache/slomesh/models/tiny-llama."""
    root = os.environ.get(MODEL_CACHE_ENV)
    base = Path(root) if root else Path.home() / ".cache" / "slomesh" / "models"
    return base / "tiny-llama"


def build_tiny_model(
    out_dir: Path,
    *,
    seed: int = 0,
    vocab_size: int = 2048,
    hidden_size: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    max_position_embeddings: int = 2048,
    weights_seed: int | None = None,
) -> Path:
    """Build (or reuse) the tiny model in `out_dir` and return `out_dir`.

    Idempotent: a directory that already holds a complete model built with the same parameters is
    returned untouched. The head dimension is hidden_size // heads, raised to 32 when smaller
    (vLLM's CPU attention supports head sizes >= 32). `weights_seed` draws the weights from
    another seed than the tokenizer's (None: `seed`): models that differ in weights only share
    one tokenizer, so a prompt is the same tokens on each. The build happens in a temporary sibling
    directory that is renamed into place, so a crashed build never leaves a half-written model.
    """
    out_dir = Path(out_dir)
    params: dict[str, Any] = {
        "format_version": _FORMAT_VERSION,
        "seed": seed,
        "vocab_size": vocab_size,
        "hidden_size": hidden_size,
        "layers": layers,
        "heads": heads,
        "kv_heads": kv_heads,
        "max_position_embeddings": max_position_embeddings,
    }
    if weights_seed is not None:
        params["weights_seed"] = weights_seed
    if _is_complete(out_dir, params):
        return out_dir
    if heads % kv_heads:
        raise ValueError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads})")

    def build(tmp: Path) -> dict[str, Any]:
        tokenizer = _build_tokenizer(seed, vocab_size)
        tokenizer.save_pretrained(tmp)
        head_dim = max(32, hidden_size // heads)
        _build_model(tmp, params, tokenizer, head_dim)
        return {
            "params": params,
            "random_weights": True,
            "tokenizer_vocab_size": len(tokenizer),
            "head_dim": head_dim,
            "description": (
                "Random-weight LlamaForCausalLM built by slomesh (services/replica/vllm/"
                "tiny_model.py) for CPU tests: byte-level BPE tokenizer trained locally on a "
                "seeded synthetic corpus, weights drawn from a seeded torch.Generator (normal, "
                "std 0.02; norms 1; special-token output rows 0 so greedy decoding never emits "
                "EOS). Its text is meaningless."
            ),
        }

    return write_into_place(out_dir, METADATA_FILE, build)


def write_into_place(
    out_dir: Path, metadata_file: str, build: Callable[[Path], dict[str, Any]]
) -> Path:
    """Build a directory atomically and return `out_dir`: `build(tmp)` writes the files into a
    temporary sibling of `out_dir` and returns its metadata, saved as JSON in `metadata_file`;
    the sibling is then renamed into place (replacing an older `out_dir`). A build that fails
    or is interrupted leaves no half-written directory behind."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        metadata = build(tmp)
        (tmp / metadata_file).write_text(json.dumps(metadata, indent=2) + "\n")
        if out_dir.exists():
            shutil.rmtree(out_dir)
        tmp.chmod(0o755)
        tmp.rename(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def _is_complete(out_dir: Path, params: dict[str, Any]) -> bool:
    meta_path = out_dir / METADATA_FILE
    if not meta_path.is_file() or not all((out_dir / f).is_file() for f in _REQUIRED_FILES):
        return False
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("params") == params


def _corpus(seed: int, num_sentences: int = 6000) -> list[str]:
    """A deterministic synthetic corpus: seeded sentences over a fixed and a made-up vocabulary."""
    rng = random.Random(seed)
    syllables = _SYLLABLES_TEXT.split()
    made_up = sorted(
        {"".join(rng.choice(syllables) for _ in range(rng.randint(2, 3))) for _ in range(600)}
    )
    vocab = [*_WORDS_TEXT.split(), *made_up]
    lines = []
    for i in range(num_sentences):
        words = [rng.choice(vocab) for _ in range(rng.randint(4, 14))]
        punct = rng.choice([".", "?", "!", ",", ":"])
        line = " ".join(words).capitalize() + punct
        if i % 7 == 0:
            line += f" {rng.randint(0, 9999)}"
        lines.append(line)
    return lines


def _build_tokenizer(seed: int, vocab_size: int) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(seed), trainer=trainer)
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)]
    )
    wrapped = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        model_max_length=1 << 30,
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def _build_model(out: Path, params: dict[str, Any], tokenizer: Any, head_dim: int) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=params["hidden_size"],
        intermediate_size=params["hidden_size"] * 4,
        num_hidden_layers=params["layers"],
        num_attention_heads=params["heads"],
        num_key_value_heads=params["kv_heads"],
        head_dim=head_dim,
        max_position_embeddings=params["max_position_embeddings"],
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        dtype="float32",
    )
    # Module construction draws from torch's global RNG: fork it so callers' state is untouched,
    # then overwrite every parameter from a local generator (independent of init order).
    with torch.random.fork_rng(devices=[]):
        model = LlamaForCausalLM(config)  # type: ignore[no-untyped-call]
    gen = torch.Generator().manual_seed(params.get("weights_seed", params["seed"]))
    special = [tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS]
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            else:
                p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.02)
        model.lm_head.weight[special] = 0.0
    model.save_pretrained(out, safe_serialization=True)
