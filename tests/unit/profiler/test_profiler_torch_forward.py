"""Forward-pass profiler: the tiny Llama timed on CPU, its fit, profile file and report, the CLI.

The measured test runs the tiny shape on one CPU thread over a 2 x 2 grid per phase (a few
seconds, most of it importing torch and transformers); the comparison logic is also checked on
synthetic samples taken from the roofline itself, where the fit must give the roofline back.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from services.profiler import torch_forward as tf
from shared.policy import UnknownNameError
from shared.profiles import default_profile, model_spec
from shared.profiles.fit import DecodeSample, PrefillSample
from shared.profiles.io import load_profiles, save_profiles
from slomesh.cli.main import main

SMALL = tf.Grid(
    prefill=tf.grid_points((1, 2), (8, 32)),
    decode=tf.grid_points((1, 2), (8, 32)),
    warmup=1,
    repeats=2,
)


@pytest.fixture(scope="module")
def measured() -> tf.Measurement:
    return tf.measure(
        tf.TINY, device="cpu", dtype="fp32", grid=SMALL, threads=1, swap_probe_bytes=4 * 2**20
    )


@pytest.fixture(scope="module")
def comparison(measured: tf.Measurement) -> tf.Comparison:
    return tf.compare(measured, "H200")


def test_tiny_cpu_run_measures_every_grid_point(measured: tf.Measurement) -> None:
    assert [(s.n, s.length) for s in measured.prefill] == list(SMALL.prefill)
    assert [(s.n, int(s.context)) for s in measured.decode] == list(SMALL.decode)
    assert all(s.time_s > 0 for s in (*measured.prefill, *measured.decode))
    assert measured.facts.params == tf.TINY.param_count()
    assert measured.facts.weight_bytes == 4 * tf.TINY.param_count()
    assert measured.facts.kv_bytes_per_token == 2 * 2 * 2 * 32 * 4
    assert measured.swap_bytes_s > 0 and measured.build_s > 0
    assert measured.device == "cpu" and measured.device_memory_bytes is None


def test_fitted_profile_is_non_negative_cpu_profile(comparison: tf.Comparison) -> None:
    p = comparison.fitted.profile
    coeffs = dataclasses.astuple(p.prefill) + dataclasses.astuple(p.decode)
    assert all(c >= 0 for c in coeffs)
    assert p.gpu == "cpu" and p.model == "tiny-llama" and p.tensor_parallel == 1
    assert p.source.startswith("fitted:torch-forward(shape=tiny,device=cpu")
    assert p.kv_capacity_bytes == tf.CPU_KV_CAPACITY_BYTES
    assert comparison.fitted.prefill_fit.samples == 4
    assert comparison.fitted.decode_fit.samples == 4


def test_profile_round_trips_through_the_file_format(
    comparison: tf.Comparison, tmp_path: Path
) -> None:
    path = tmp_path / "forward.json"
    save_profiles(path, [comparison.fitted.profile], tf.report_dict(comparison))
    assert load_profiles(path) == [comparison.fitted.profile]
    report = json.loads(path.read_text())["report"]
    assert report["kind"] == "torch-forward"
    assert report["roofline_source"] == comparison.roofline.source
    assert len(report["points"]) == len(SMALL.prefill) + len(SMALL.decode)


def test_report_names_both_profiles(comparison: tf.Comparison) -> None:
    text = tf.render_report(comparison, profile_path="x.json")
    assert comparison.fitted.profile.source in text
    assert comparison.roofline.source.startswith("derived:roofline(")
    assert comparison.roofline.source in text
    assert "H200-141GB" in text and "CPU run" in text
    assert "## Prefill steps" in text and "## Decode steps" in text
    assert "## Implied efficiency factors" in text


def test_llama_shape_matches_the_catalog() -> None:
    spec = model_spec("llama-3.1-8b")
    s = tf.LLAMA_31_8B
    assert s.param_count() == spec.params
    assert (s.layers, s.hidden_size, s.heads, s.kv_heads, s.head_dim) == (
        spec.layers,
        spec.hidden_size,
        spec.attention_heads,
        spec.kv_heads,
        spec.head_dim,
    )
    assert s.kv_bytes_per_token(2) == spec.kv_bytes_per_token


def test_gpu_names_resolve_by_unique_prefix() -> None:
    assert tf.resolve_gpu("H200") == "H200-141GB"
    assert tf.resolve_gpu("H200-141GB") == "H200-141GB"
    with pytest.raises(UnknownNameError):
        tf.resolve_gpu("B200")


def _synthetic(gpu: str = "H200-141GB") -> tf.Measurement:
    """A bf16 llama-3.1-8b 'measurement' whose times are the roofline's own predictions."""
    roof = default_profile(gpu, "llama-3.1-8b", 1)
    grid = tf.default_grid("llama-3.1-8b", quick=True)
    shape = tf.LLAMA_31_8B
    params = shape.param_count()
    emb = shape.vocab_size * shape.hidden_size
    facts = tf.ModelFacts(
        params=params,
        weight_bytes=2 * params,
        embedding_params=emb,
        lm_head_params=emb,
        layer_params=params - 2 * emb,
        streamed_bytes=2 * (params - emb),
        dtype_bytes=2,
        kv_bytes_per_token=shape.kv_bytes_per_token(2),
    )
    return tf.Measurement(
        shape=shape,
        device="cuda",
        device_name="synthetic",
        dtype="bf16",
        facts=facts,
        prefill=tuple(PrefillSample(n, ln, roof.prefill_time_s(n, ln)) for n, ln in grid.prefill),
        decode=tuple(DecodeSample(n, c, roof.decode_time_s(c, n)) for n, c in grid.decode),
        build_s=10.0,
        swap_bytes_s=50e9,
        device_memory_bytes=int(141e9),
        grid=grid,
    )


def test_roofline_samples_fit_back_to_the_roofline() -> None:
    c = tf.compare(_synthetic(), "H200")
    assert c.fitted.profile.gpu == "H200-141GB"
    assert c.roofline == default_profile("H200-141GB", "llama-3.1-8b", 1)
    for p in c.points:
        assert p.ratio == pytest.approx(1.0)
        assert p.fitted_s == pytest.approx(p.measured_s, rel=1e-6)
    # the roofline's own times imply less than its efficiency factors (it adds fixed costs)
    assert 0 < c.prefill_efficiency < c.roofline_params.eff_compute
    assert 0 < c.decode_efficiency < c.roofline_params.eff_mem
    kv = c.fitted.profile.kv_capacity_bytes
    assert kv == int(0.9 * 141e9 - 2 * tf.LLAMA_31_8B.param_count() - 2 * 2**30)


def test_cli_refuses_the_8b_shape_on_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile-forward", "--device", "cpu", "--shape", "llama-3.1-8b"]) == 2
    err = capsys.readouterr().err
    assert "--allow-cpu" in err and "--shape tiny" in err


def test_cli_writes_profile_and_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(tf, "default_grid", lambda shape, quick: SMALL)
    out = tmp_path / "p.json"
    args = ["profile-forward", "--shape", "tiny", "--device", "cpu", "--threads", "1"]
    assert main([*args, "--quick", "--gpu", "H200", "--out-profile", str(out)]) == 0
    [profile] = load_profiles(out)
    assert profile.gpu == "cpu" and profile.model == "tiny-llama"
    report = out.with_suffix(".md").read_text()
    assert profile.source in report and "derived:roofline(" in report
    assert "derived:roofline(" in capsys.readouterr().out
