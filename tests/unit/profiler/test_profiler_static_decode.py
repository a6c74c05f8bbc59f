"""The forward profiler's static-cache decode step (CPU: the same step a CUDA graph captures,
run eagerly): it computes what a plain forward computes, repeats on the same context, and its
mask-free attention equals the masked one when every cached position is visible."""

from __future__ import annotations

import pytest
import torch

from services.profiler import torch_forward as tf
from services.profiler.torch_forward import static_decode


def _tiny_model() -> object:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    config = tf.llama_config(tf.TINY)
    return AutoModelForCausalLM.from_config(  # type: ignore[no-untyped-call]
        config, dtype=torch.float32, attn_implementation="sdpa"
    ).eval()


@pytest.mark.parametrize(
    ("n", "context", "max_prefill_tokens"),
    [
        (1, 16, 16384),  # one prefill chunk
        (4, 40, 64),  # chunks of 16 tokens: 16 + 16 + 8
        (3, 1, 16384),  # a one-token context
    ],
)
def test_static_step_matches_a_plain_forward_and_repeats(
    n: int, context: int, max_prefill_tokens: int
) -> None:
    model = _tiny_model()
    with torch.inference_mode():
        step = tf.prepare_static_step(
            model,
            n=n,
            context=context,
            vocab_size=tf.TINY.vocab_size,
            max_prefill_tokens=max_prefill_tokens,
            keep_kw="logits_to_keep",
            capture=True,  # no CUDA here: runs eagerly and says so
        )
        assert step.mode == "static-eager: no CUDA graphs on cpu"
        assert tuple(step.prompt_ids.shape) == (n, context)
        outs = [step.call().logits[:, -1] for _ in range(4)]  # type: ignore[attr-defined]
        # A plain forward over prompt + step token (its own cache, its own causal mask).
        model.config._attn_implementation = static_decode.FILL_ATTENTION  # type: ignore[attr-defined]
        ids = torch.cat([step.prompt_ids, step.step_ids], dim=1)
        want = model(input_ids=ids).logits[:, -1]  # type: ignore[operator]
    for got in outs:  # every repeat writes the same slot: same context, same result
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_static_step_rejects_an_empty_point() -> None:
    with pytest.raises(ValueError, match="both must be >= 1"):
        tf.prepare_static_step(
            _tiny_model(),
            n=0,
            context=8,
            vocab_size=tf.TINY.vocab_size,
            max_prefill_tokens=64,
            keep_kw="logits_to_keep",
            capture=False,
        )


def test_decode_attention_without_the_mask_equals_the_masked_attention() -> None:
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    class Layer(torch.nn.Module):
        num_key_value_groups = 4
        is_causal = True

    g = torch.Generator().manual_seed(1)
    q = torch.randn(2, 8, 1, 16, generator=g)
    k = torch.randn(2, 2, 9, 16, generator=g)
    v = torch.randn(2, 2, 9, 16, generator=g)
    all_visible = torch.ones(2, 1, 1, 9, dtype=torch.bool)
    got, _ = static_decode._decode_sdpa(Layer(), q, k, v, all_visible, scaling=0.25)
    want, _ = sdpa_attention_forward(Layer(), q, k, v, all_visible, scaling=0.25)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_measure_refuses_an_unknown_decode_mode() -> None:
    grid = tf.default_grid("tiny", quick=True)
    with pytest.raises(ValueError, match="decode_mode must be one of cuda-graph, eager"):
        tf.measure(tf.TINY, device="cpu", dtype="fp32", grid=grid, decode_mode="graphs")
