"""Publishing profile files: profiler store, scheduler replicas, vLLM replicas' decode_coeffs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from services.profiler.deployment import ProfilerArgs, build_store
from services.replica.vllm.config import VLLMEngineConfig
from services.scheduler.args import SchedulerArgs, live_replicas, load_profile_files
from services.scheduler.core.qlm.rwt import InstanceRates
from shared.domain import SLO, DecodeCoeffs, HardwareProfile, PrefillCoeffs, Request
from shared.profiles import default_profile
from shared.profiles.io import load_profiles, save_profiles
from slomesh.cli.main import build_parser
from slomesh.launch import mesh

CPU_TINY = HardwareProfile(
    gpu="cpu",
    model="tiny-llama",
    tensor_parallel=1,
    prefill=PrefillCoeffs(p1=5e-5, p2=1e-3, p3=1e-5, p4=0.01),
    decode=DecodeCoeffs(d1=1e-7, d2=5e-4, d3=1e-6, d4=0.005),
    kv_capacity_bytes=64 << 20,
    kv_bytes_per_token=1024,
    weight_bytes=1_049_856,
    swap_bytes_s=5e9,
    cold_load_bytes_s=3e5,
    inefficiency=1.1,
    source="fitted:vllm sweep (20 prefill + 15 decode points)",
)

LOCAL_YAML = Path(__file__).resolve().parents[3] / "deploy" / "ray" / "local.yaml"

REPLICAS = [
    {"application": "replica-0", "gpu": "cpu", "model": "tiny-llama"},
    {"application": "replica-1", "gpu": "A100-80GB", "model": "llama-3.1-8b"},
]


@pytest.fixture
def profile_file(tmp_path: Path) -> Path:
    path = tmp_path / "cpu-tiny-llama.json"
    save_profiles(path, [CPU_TINY], {"fit": {}})
    return path


def test_scheduler_prefers_the_loaded_profile(profile_file: Path) -> None:
    args = SchedulerArgs.model_validate(
        {"replicas": REPLICAS, "profile_files": [str(profile_file)]}
    )
    cpu, gpu = live_replicas(args)
    assert cpu.profile("tiny-llama") == CPU_TINY
    assert gpu.profile("llama-3.1-8b") == default_profile("A100-80GB", "llama-3.1-8b")
    # QLM's live Θ for the CPU model now comes from the measured profile (not the fallback)
    rates = InstanceRates.from_profile(cpu.profile("tiny-llama"), 64, 32, max_num_seqs=16)
    assert rates.inefficiency == 1.1 and rates.theta_tok_s > 0


def test_scheduler_without_files_has_no_cpu_profile() -> None:
    args = SchedulerArgs.model_validate({"replicas": REPLICAS})
    assert args.profile_files == []
    cpu, _ = live_replicas(args)
    assert cpu.profile_ is None


def test_later_file_wins_and_tp_must_match(tmp_path: Path, profile_file: Path) -> None:
    newer = dataclasses.replace(CPU_TINY, inefficiency=1.5)
    tp2 = dataclasses.replace(CPU_TINY, tensor_parallel=2, inefficiency=2.0)
    second = tmp_path / "second.json"
    save_profiles(second, [newer, tp2])
    loaded = load_profile_files([str(profile_file), str(second)])
    assert loaded[("cpu", "tiny-llama", 1)].inefficiency == 1.5
    args = SchedulerArgs.model_validate(
        {"replicas": REPLICAS[:1], "profile_files": [str(profile_file), str(second)]}
    )
    assert live_replicas(args)[0].profile("tiny-llama").inefficiency == 1.5


def test_profiler_store_loads_the_files(profile_file: Path) -> None:
    store = build_store(ProfilerArgs(profile_files=[str(profile_file)]))
    assert store.get("cpu", "tiny-llama") == CPU_TINY
    req = Request("r", "tiny-llama", 100, 50, 0.0, SLO(1.0))
    est = store.estimate(req, type("P", (), {"mean_tokens": 20.0})(), "cpu")
    assert est.profile_source == CPU_TINY.source
    assert est.prefill_s == pytest.approx(CPU_TINY.prefill_time_s(1, 100))
    assert build_store(ProfilerArgs()).registered() == []


def test_bad_profile_file_is_an_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "nope"}')
    args = SchedulerArgs.model_validate({"replicas": REPLICAS, "profile_files": [str(bad)]})
    with pytest.raises(ValueError, match="format"):
        live_replicas(args)


def test_with_profiles_publishes_to_scheduler_profiler_and_vllm_replicas(
    profile_file: Path,
) -> None:
    config = mesh.load_config(LOCAL_YAML)
    out = mesh.with_profiles(config, [profile_file])
    apps = {a["name"]: a for a in out["applications"]}
    want = [str(profile_file.resolve())]
    assert apps["scheduler"]["args"]["profile_files"] == want
    assert apps["profiler"]["args"]["profile_files"] == want
    d = CPU_TINY.decode
    replicas = [name for name in apps if name.startswith("replica-")]
    assert replicas  # every vLLM replica of the shipped config, however many it lists
    for name in replicas:
        vllm = apps[name]["args"]["vllm"]
        assert vllm["decode_coeffs"] == [d.d1, d.d2, d.d3, d.d4]
        cfg = VLLMEngineConfig.model_validate(vllm)
        assert cfg.decode_coeffs == (d.d1, d.d2, d.d3, d.d4)
    # the input config is untouched; applying twice does not duplicate the files
    before = {a["name"]: a for a in config["applications"]}
    assert "profile_files" not in (before["scheduler"].get("args") or {})
    assert "decode_coeffs" not in before["replica-0"]["args"]["vllm"]
    twice = mesh.with_profiles(out, [profile_file])
    assert {a["name"]: a for a in twice["applications"]}["scheduler"]["args"][
        "profile_files"
    ] == want


def test_with_profiles_skips_replicas_without_a_matching_profile(tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    save_profiles(other, [dataclasses.replace(CPU_TINY, model="other-model")])
    out = mesh.with_profiles(mesh.load_config(LOCAL_YAML), [other])
    for app in out["applications"]:
        if app["name"].startswith("replica-"):
            assert "decode_coeffs" not in app["args"]["vllm"]


def test_with_profiles_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        mesh.with_profiles({"applications": []}, [tmp_path / "missing.json"])


def test_up_accepts_repeated_profile_flags() -> None:
    args = build_parser().parse_args(["up", "--profile", "a.json", "--profile", "b.json"])
    assert args.profile == [Path("a.json"), Path("b.json")]
    assert build_parser().parse_args(["up"]).profile == []


def test_shipped_cpu_profile_matches_the_local_vllm_replicas() -> None:
    """`slomesh up --engine vllm` publishes deploy/ray/profiles/cpu-tiny-llama.json by default:
    it must parse and match every vLLM replica of local.yaml (gpu cpu, tiny-llama, tp 1)."""
    import yaml

    root = LOCAL_YAML.parents[2]
    shipped = root / mesh.DEFAULT_PROFILES["vllm"]
    (prof,) = load_profiles(shipped)
    assert (prof.gpu, prof.model, prof.tensor_parallel) == ("cpu", "tiny-llama", 1)
    out = mesh.with_profiles(yaml.safe_load(LOCAL_YAML.read_text()), [shipped])
    replicas = [a for a in out["applications"] if a["name"].startswith("replica-")]
    assert replicas
    d = prof.decode
    for app in replicas:
        assert app["args"]["vllm"]["decode_coeffs"] == [d.d1, d.d2, d.d3, d.d4]
