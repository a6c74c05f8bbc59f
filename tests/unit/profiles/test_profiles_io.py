"""Profile files: round trip and errors that name the field."""

from __future__ import annotations

import json

import pytest

from shared.profiles import default_profile
from shared.profiles.io import (
    load_profiles,
    profile_from_dict,
    profile_to_dict,
    profiles_from_json,
    profiles_to_json,
    save_profiles,
)


def test_profiles_io_round_trip(tmp_path):
    a = default_profile("A100-80GB", "llama-3.1-8b")
    path = tmp_path / "sub" / "p.json"
    save_profiles(path, [a], {"rmse_s": {"prefill": 0.001}})
    (back,) = load_profiles(path)
    assert back == a
    assert json.loads(path.read_text())["report"] == {"rmse_s": {"prefill": 0.001}}


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("decode_coeffs_s"), "missing decode_coeffs_s"),
        (lambda d: d.update(extra=1), "unknown fields extra"),
        (lambda d: d.update(prefill_coeffs_s=[1, 2, 3]), "prefill_coeffs_s must be a list of 5"),
        (lambda d: d.pop("delivery_overhead_s"), "missing delivery_overhead_s"),
        (lambda d: d.update(submit_overhead_s=-1e-3), "submit_overhead_s must be a number >= 0"),
        (lambda d: d.update(decode_coeffs_s=[1, 2, 3, -1]), "decode_coeffs_s must be finite"),
        (lambda d: d.update(kv_bytes_per_token=0), "kv_bytes_per_token must be a positive int"),
        (lambda d: d.update(swap_bytes_s=0), "swap_bytes_s must be a number > 0"),
    ],
)
def test_profiles_io_bad_profile_names_the_field(mutate, message):
    d = profile_to_dict(default_profile("A100-80GB", "llama-3.1-8b"))
    mutate(d)
    with pytest.raises(ValueError, match=message):
        profile_from_dict(d)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not JSON"),
        ('{"format": "x"}', 'format must be "slomesh-profile"'),
        ('{"format": "slomesh-profile", "version": 9}', "version must be one of 1, 2"),
        ('{"format": "slomesh-profile", "version": true}', "version must be one of 1, 2"),
        ('{"format": "slomesh-profile", "version": 1, "profiles": []}', "non-empty list"),
    ],
)
def test_profiles_io_bad_file(text, message):
    with pytest.raises(ValueError, match=message):
        profiles_from_json(text)


def test_profiles_io_error_names_the_entry():
    good = profile_to_dict(default_profile("A100-80GB", "llama-3.1-8b"))
    bad = dict(good, inefficiency=0.5)
    text = profiles_to_json([]).replace('"profiles": []', f'"profiles": {json.dumps([good, bad])}')
    with pytest.raises(ValueError, match="inefficiency must be >= 1"):
        profiles_from_json(text)


def test_profiles_io_reads_version_1_files_with_zero_attention_and_overheads():
    """A version 1 file (four prefill coefficients, no overhead fields) loads as before."""
    v2 = profile_to_dict(default_profile("A100-80GB", "llama-3.1-8b"))
    v1 = {k: v for k, v in v2.items() if k not in ("submit_overhead_s", "delivery_overhead_s")}
    v1["prefill_coeffs_s"] = v2["prefill_coeffs_s"][:4]
    text = json.dumps({"format": "slomesh-profile", "version": 1, "profiles": [v1]})
    (p,) = profiles_from_json(text)
    assert p.prefill.p5 == 0.0 and p.submit_overhead_s == 0.0 and p.delivery_overhead_s == 0.0
    assert [p.prefill.p1, p.prefill.p2, p.prefill.p3, p.prefill.p4] == v1["prefill_coeffs_s"]
    # a version 1 file may not carry version 2 fields
    v1["submit_overhead_s"] = 0.001
    with pytest.raises(ValueError, match="unknown fields submit_overhead_s"):
        profiles_from_json(
            json.dumps({"format": "slomesh-profile", "version": 1, "profiles": [v1]})
        )


def test_profiles_io_round_trips_attention_and_overheads():
    import dataclasses

    base = default_profile("A100-80GB", "llama-3.1-8b")
    p = dataclasses.replace(
        base,
        prefill=dataclasses.replace(base.prefill, p5=2e-9),
        submit_overhead_s=0.0012,
        delivery_overhead_s=0.0007,
    )
    (back,) = profiles_from_json(profiles_to_json([p]))
    assert back == p
