"""`slomesh profile` on the simulated engine: the profile file round trip and flag errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared.profiles import default_profile
from shared.profiles.io import load_profiles
from slomesh.cli.main import main


def test_simulated_profile_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = tmp_path / "records.jsonl"
    records.write_text(
        "\n".join(
            json.dumps({"model": "mistral-7b", "slo_class": "interactive", "output_tokens": n})
            for n in (10, 20, 30, 40)
        )
        + "\n"
    )
    out = tmp_path / "prof" / "a100.json"
    argv = ["profile", "--engine", "simulated", "--gpu", "A100-80GB", "--sim-model", "mistral-7b"]
    assert main([*argv, "--out", str(out), "--workload", str(records)]) == 0
    (prof,) = load_profiles(out)
    truth = default_profile("A100-80GB", "mistral-7b")
    assert (prof.gpu, prof.model, prof.tensor_parallel) == ("A100-80GB", "mistral-7b", 1)
    for got, want in ((prof.prefill, truth.prefill), (prof.decode, truth.decode)):
        for name in got.__slots__:
            assert getattr(got, name) == pytest.approx(getattr(want, name), rel=0.02, abs=1e-12)
    assert prof.kv_capacity_bytes == truth.kv_capacity_bytes
    assert prof.inefficiency == pytest.approx(1.0, abs=0.01)
    report = json.loads(out.read_text())["report"]
    assert report["mode"] == "quick" and report["engine"] == "simulated"
    for kind in ("prefill", "decode"):
        assert report["fit"][kind]["r2"] > 0.999
        assert report["fit"][kind]["rmse_s"] >= 0
        assert len(report["points"][kind]) == report["fit"][kind]["points"]
    assert report["workload"][0]["mean_output_tokens"] == 25.0
    printed = capsys.readouterr().out
    for needle in ("prefill", "decode", "RMSE", "KV capacity", "swap", "ε =", f"wrote {out}"):
        assert needle in printed


def test_default_out_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["profile", "--engine", "simulated", "--gpu", "A10-24GB", "--sim-model", "mistral-7b"]
    assert main(argv) == 0
    assert (tmp_path / "runs" / "profiles" / "A10-24GB-mistral-7b.json").is_file()


SIM = ["profile", "--engine", "simulated"]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        ([*SIM, "--sim-model", "mistral-7b"], "--gpu: required with --engine simulated"),
        ([*SIM, "--gpu", "A100-80GB"], "--sim-model: required with --engine simulated"),
        ([*SIM, "--gpu", "A100-80GB", "--sim-model", "x", "--model", "m"], "--model: only with"),
        ([*SIM, "--gpu", "A100-80G", "--sim-model", "mistral-7b"], "unknown gpu 'A100-80G'"),
        ([*SIM, "--gpu", "A100-80GB", "--sim-model", "nope"], "unknown model 'nope'"),
        (
            [
                *SIM,
                "--gpu",
                "A100-80GB",
                "--sim-model",
                "mistral-7b",
                "--kv-cache-memory-bytes",
                "9",
            ],
            "--kv-cache-memory-bytes: only with --engine vllm",
        ),
        (
            [*SIM, "--gpu", "A100-80GB", "--sim-model", "mistral-7b", "--max-num-seqs", "0"],
            "--max-num-seqs: must be >= 1",
        ),
        (
            [*SIM, "--gpu", "A100-80GB", "--sim-model", "mistral-7b", "--workload", "/nope.jsonl"],
            "--workload: /nope.jsonl is not a file",
        ),
        (["profile", "--engine", "vllm", "--sim-model", "mistral-7b"], "--sim-model: only with"),
    ],
)
def test_bad_flags_name_the_flag(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert needle in capsys.readouterr().err


def test_quick_and_full_are_exclusive(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([*SIM, "--gpu", "A100-80GB", "--sim-model", "mistral-7b", "--quick", "--full"])
    assert exc.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
