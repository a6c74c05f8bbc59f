"""ProfileStore: defaults, registered profiles (fitted, CPU), lookup errors and estimates."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from services.profiler.core import CPU_DEVICE, Estimate, ProfileLookupError, ProfileStore
from shared.domain import SLO, DecodeCoeffs, HardwareProfile, PrefillCoeffs, Request
from shared.policy import UnknownNameError
from shared.profiles import default_profile

HAND = HardwareProfile(
    gpu=CPU_DEVICE,
    model="tiny",
    tensor_parallel=1,
    prefill=PrefillCoeffs(p1=1e-4, p2=1e-3, p3=2e-5, p4=0.01),
    decode=DecodeCoeffs(d1=1e-6, d2=2e-4, d3=3e-6, d4=0.02),
    kv_capacity_bytes=10**9,
    kv_bytes_per_token=1000,
    weight_bytes=10**8,
    swap_bytes_s=1e9,
    cold_load_bytes_s=1e9,
    source="fitted:hand",
)


def req(model: str, input_tokens: int = 200, max_tokens: int = 1000) -> Request:
    return Request("r", model, input_tokens, max_tokens, 0.0, SLO(ttft_deadline_s=1.0))


def mean(tokens: float) -> SimpleNamespace:
    return SimpleNamespace(mean_tokens=tokens)


@pytest.mark.parametrize(
    ("input_tokens", "max_tokens", "mean_tokens", "prefill", "decode", "kv"),
    [
        # prefill 1e-4·200 + 1e-3 + 2e-5·200 + 0.01; decode at context 200 + 100/2 = 250:
        # 1e-6·250 + 2e-4 + 3e-6·250 + 0.02; kv (200 + 100)·1000
        (200, 1000, 100.0, 0.035, 0.0212, 300_000),
        # mean 500 capped by max_tokens 300: context 200 + 150, kv 500·1000
        (200, 300, 500.0, 0.035, 0.0216, 500_000),
        # one-token prompt, nothing predicted: kv rounds (1 + 0)·1000
        (1, 10, 0.0, 1e-4 + 1e-3 + 2e-5 + 0.01, 1e-6 + 2e-4 + 3e-6 + 0.02, 1000),
        # fractional mean: kv = ceil((10 + 2.5)·1000)
        (10, 10, 2.5, 1e-3 + 1e-3 + 2e-4 + 0.01, 11.25e-6 + 2e-4 + 33.75e-6 + 0.02, 12_500),
    ],
)
def test_estimate_by_hand(
    input_tokens: int,
    max_tokens: int,
    mean_tokens: float,
    prefill: float,
    decode: float,
    kv: int,
) -> None:
    store = ProfileStore(profiles=[HAND])
    est = store.estimate(req("tiny", input_tokens, max_tokens), mean(mean_tokens), CPU_DEVICE)
    assert est.prefill_s == pytest.approx(prefill, rel=1e-12)
    assert est.decode_s_per_token == pytest.approx(decode, rel=1e-12)
    assert est.kv_bytes == kv
    assert est.profile_source == "fitted:hand"


def test_estimate_uses_the_default_profile_for_catalogued_pairs() -> None:
    est = ProfileStore().estimate(req("llama-2-70b", 1000), mean(200.0), "A100-80GB")
    prof = default_profile("A100-80GB", "llama-2-70b")
    assert prof.tensor_parallel == 2
    assert est == Estimate(
        prefill_s=prof.prefill_time_s(1, 1000),
        decode_s_per_token=prof.decode_time_s(1100, 1),
        kv_bytes=1200 * prof.kv_bytes_per_token,
        profile_source=prof.source,
    )
    assert est.profile_source.startswith("derived:roofline")


@pytest.mark.parametrize(
    ("gpu", "model", "tp", "field", "mentions"),
    [
        ("B200", "llama-3.1-8b", None, "gpu", "A100-80GB"),
        (CPU_DEVICE, "tiny", None, "gpu", "put()"),  # CPU is never in the catalog
        ("A100-80GB", "gpt-9", None, "model", "llama-2-70b"),
        ("A100-80GB", "llama-2-70b", 1, "tensor_parallel", "does not fit"),
        ("A100-80GB", "llama-3.1-8b", 3, "tensor_parallel", "divide"),
        ("A100-80GB", "llama-3.1-8b", 0, "tensor_parallel", ">= 1"),
    ],
)
def test_lookup_errors_name_the_field(
    gpu: str, model: str, tp: int | None, field: str, mentions: str
) -> None:
    with pytest.raises(ProfileLookupError) as exc:
        ProfileStore().get(gpu, model, tp)
    assert exc.value.field == field
    assert str(exc.value).startswith(f"unknown {field} ")
    assert mentions in str(exc.value)
    assert isinstance(exc.value, UnknownNameError) and isinstance(exc.value, ValueError)


def test_cpu_profiles_registered_at_runtime() -> None:
    store = ProfileStore()
    store.put(HAND)
    assert store.get(CPU_DEVICE, "tiny") is HAND
    assert store.get(CPU_DEVICE, "tiny", 1) is HAND
    assert CPU_DEVICE in store.gpus()
    with pytest.raises(ProfileLookupError) as exc:
        store.get(CPU_DEVICE, "llama-3.1-8b")  # catalogued model, but nothing on cpu
    assert exc.value.field == "model"
    assert exc.value.valid == ["tiny"]
    with pytest.raises(ProfileLookupError) as exc:
        store.get(CPU_DEVICE, "tiny", 2)
    assert exc.value.field == "tensor_parallel"
    assert exc.value.valid == ["1"]


def test_put_overrides_the_default() -> None:
    store = ProfileStore()
    derived = store.get("H100-80GB", "llama-3.1-8b")
    assert derived.tensor_parallel == 1 and derived.source.startswith("derived:")
    fitted = dataclasses.replace(
        derived, decode=DecodeCoeffs(0.0, 0.0, 0.0, 0.05), source="fitted:12 decode samples"
    )
    store.put(fitted)
    assert store.get("H100-80GB", "llama-3.1-8b") is fitted
    assert store.get("H100-80GB", "llama-3.1-8b", 1) is fitted
    assert store.get("H100-80GB", "llama-3.1-8b", 2).source.startswith("derived:")  # other tp
    est = store.estimate(req("llama-3.1-8b"), mean(10.0), "H100-80GB")
    assert est.decode_s_per_token == pytest.approx(0.05)
    assert est.profile_source == "fitted:12 decode samples"
    assert store.registered() == [fitted]


def test_registered_tp_outside_the_fitting_choices_is_found() -> None:
    store = ProfileStore()
    over = dataclasses.replace(default_profile("A100-80GB", "llama-3.1-8b", 4), source="fitted:x")
    store.put(over)
    assert store.get("A100-80GB", "llama-3.1-8b", 4) is over
    assert store.get("A100-80GB", "llama-3.1-8b").tensor_parallel == 1  # auto stays smallest


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_estimate_rejects_bad_means(bad: float) -> None:
    with pytest.raises(ValueError, match=r"prediction\.mean_tokens"):
        ProfileStore(profiles=[HAND]).estimate(req("tiny"), mean(bad), CPU_DEVICE)


def test_put_rejects_non_profiles() -> None:
    with pytest.raises(TypeError, match="HardwareProfile"):
        ProfileStore().put("A100")  # type: ignore[arg-type]
