"""`slomesh fidelity`'s pure helpers: picking the profile and spotting setting mismatches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared.domain import DecodeCoeffs, HardwareProfile, PrefillCoeffs
from shared.profiles.io import save_profiles
from slomesh.cli.errors import UsageError
from slomesh.cli.fidelity import pick_profile, profile_load, setting_mismatches
from slomesh.cli.main import build_parser


def _profile(model: str) -> HardwareProfile:
    return HardwareProfile(
        gpu="cpu",
        model=model,
        tensor_parallel=1,
        prefill=PrefillCoeffs(1e-5, 0.0, 1e-5, 2e-3),
        decode=DecodeCoeffs(1e-7, 5e-5, 0.0, 2e-3),
        kv_capacity_bytes=64 << 20,
        kv_bytes_per_token=1024,
        weight_bytes=1 << 20,
        swap_bytes_s=1e9,
        cold_load_bytes_s=1e9,
    )


def test_pick_profile(tmp_path: Path) -> None:
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    save_profiles(one, [_profile("tiny-llama")])
    save_profiles(two, [_profile("a"), _profile("b")])
    assert pick_profile(one, None).model == "tiny-llama"
    assert pick_profile(two, "b").model == "b"
    with pytest.raises(UsageError, match="--profile-model"):
        pick_profile(two, None)
    with pytest.raises(UsageError, match="has no profile"):
        pick_profile(two, "c")
    with pytest.raises(UsageError, match="no profile file"):
        pick_profile(tmp_path / "missing.json", None)


def test_setting_mismatches_read_the_profile_report(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    info = {"dtype": "torch.float32", "torch_threads": [1]}
    save_profiles(path, [_profile("tiny-llama")], {"engine_info": info})
    assert setting_mismatches(path, "float32", 1) == []
    assert setting_mismatches(path, "auto", None) == []
    warnings = setting_mismatches(path, "bfloat16", 2)
    assert len(warnings) == 2 and "float32" in warnings[0] and "[1]" in warnings[1]
    bare = tmp_path / "bare.json"
    save_profiles(bare, [_profile("tiny-llama")])
    assert setting_mismatches(bare, "bfloat16", 2) == []
    (tmp_path / "junk.json").write_text(json.dumps([1, 2]))
    assert setting_mismatches(tmp_path / "junk.json", "float32", 1) == []


def test_profile_load_from_the_report(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    host = {"load_avg_1m_before": 3.4, "load_avg_1m_after": 4.31}
    save_profiles(path, [_profile("tiny-llama")], {"host": host})
    assert profile_load(path) == "3.4 -> 4.3"
    save_profiles(path, [_profile("tiny-llama")])
    assert profile_load(path) == "not recorded"


def test_fidelity_is_a_slomesh_command() -> None:
    args = build_parser().parse_args(
        ["fidelity", "--profile", "p.json", "--requests", "20", "--rate", "3", "--repeats", "2"]
    )
    assert (args.requests, args.rate, args.repeats, args.max_num_seqs) == (20, 3.0, 2, 16)
    assert args.profile == Path("p.json") and args.seed == 0 and args.out is None
