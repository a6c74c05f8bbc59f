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
        (lambda d: d.update(prefill_coeffs_s=[1, 2, 3]), "prefill_coeffs_s must be a list of 4"),
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
        ('{"format": "slomesh-profile", "version": 9}', "version must be 1"),
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
