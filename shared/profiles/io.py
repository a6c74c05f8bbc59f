"""Profile files: the JSON the profiler writes and the scheduler, replicas and simulator read.

A profile file holds one object:
    {"format": "slomesh-profile", "version": 2, "profiles": [<profile>, ...], "report": {...}}
Each <profile> has every HardwareProfile field; prefill coefficients are a list of five seconds
values [p1, p2, p3, p4, p5] (p5: attention, per request·token²), decode coefficients four
[d1, d2, d3, d4]; "submit_overhead_s" and "delivery_overhead_s" are the serving front end's
per-request costs. "report" is free-form (fit RMSE, sweep points, timings) and is ignored when
loading. Unknown or missing profile fields are errors that name the field.

Version 1 files (four prefill coefficients, no overhead fields) still load: p5 and both
overheads read as 0. Any other version fails, naming the versions this code reads.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from shared.domain.profile import DecodeCoeffs, HardwareProfile, PrefillCoeffs

FILE_FORMAT = "slomesh-profile"
FILE_VERSION = 2
READABLE_VERSIONS = (1, 2)

_FIELDS = (
    "gpu",
    "model",
    "tensor_parallel",
    "prefill_coeffs_s",
    "decode_coeffs_s",
    "kv_capacity_bytes",
    "kv_bytes_per_token",
    "weight_bytes",
    "swap_bytes_s",
    "cold_load_bytes_s",
    "inefficiency",
    "source",
)
_V2_FIELDS = ("submit_overhead_s", "delivery_overhead_s")


def profile_to_dict(p: HardwareProfile) -> dict[str, Any]:
    """JSON-able form of one profile (the <profile> object of the module docstring)."""
    return {
        "gpu": p.gpu,
        "model": p.model,
        "tensor_parallel": p.tensor_parallel,
        "prefill_coeffs_s": [
            p.prefill.p1,
            p.prefill.p2,
            p.prefill.p3,
            p.prefill.p4,
            p.prefill.p5,
        ],
        "decode_coeffs_s": [p.decode.d1, p.decode.d2, p.decode.d3, p.decode.d4],
        "kv_capacity_bytes": p.kv_capacity_bytes,
        "kv_bytes_per_token": p.kv_bytes_per_token,
        "weight_bytes": p.weight_bytes,
        "swap_bytes_s": p.swap_bytes_s,
        "cold_load_bytes_s": p.cold_load_bytes_s,
        "inefficiency": p.inefficiency,
        "source": p.source,
        "submit_overhead_s": p.submit_overhead_s,
        "delivery_overhead_s": p.delivery_overhead_s,
    }


def _coeffs(d: Mapping[str, Any], key: str, where: str, count: int = 4) -> list[float]:
    raw = d[key]
    if not isinstance(raw, Sequence) or isinstance(raw, str) or len(raw) != count:
        raise ValueError(f"{where}.{key} must be a list of {count} numbers (seconds), got {raw!r}")
    out = [float(x) for x in raw]
    if any(not (math.isfinite(x) and x >= 0) for x in out):
        raise ValueError(f"{where}.{key} must be finite and >= 0, got {out}")
    return out


def profile_from_dict(
    d: Mapping[str, Any], where: str = "profile", version: int = FILE_VERSION
) -> HardwareProfile:
    """Inverse of profile_to_dict; errors name the field (`where` prefixes it). `version` is the
    file's: version 1 profiles have four prefill coefficients and no overhead fields."""
    fields = _FIELDS + (_V2_FIELDS if version >= 2 else ())
    missing = [k for k in fields if k not in d]
    if missing:
        raise ValueError(f"{where} is missing {', '.join(missing)}")
    extra = sorted(set(d) - set(fields))
    if extra:
        raise ValueError(f"{where} has unknown fields {', '.join(extra)}")
    for key in ("kv_capacity_bytes", "kv_bytes_per_token", "weight_bytes", "tensor_parallel"):
        v = d[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < (1 if key != "weight_bytes" else 0):
            raise ValueError(f"{where}.{key} must be a positive int, got {v!r}")
    for key in ("swap_bytes_s", "cold_load_bytes_s"):
        v = d[key]
        if not isinstance(v, int | float) or not (math.isfinite(v) and v > 0):
            raise ValueError(f"{where}.{key} must be a number > 0 (bytes per second), got {v!r}")
    p = _coeffs(d, "prefill_coeffs_s", where, 5 if version >= 2 else 4)
    dc = _coeffs(d, "decode_coeffs_s", where)
    overheads = {}
    for key in _V2_FIELDS if version >= 2 else ():
        v = d[key]
        if (
            isinstance(v, bool)
            or not isinstance(v, int | float)
            or not (math.isfinite(v) and v >= 0)
        ):
            raise ValueError(f"{where}.{key} must be a number >= 0 (seconds), got {v!r}")
        overheads[key] = float(v)
    return HardwareProfile(
        gpu=str(d["gpu"]),
        model=str(d["model"]),
        tensor_parallel=int(d["tensor_parallel"]),
        prefill=PrefillCoeffs(*p),
        decode=DecodeCoeffs(*dc),
        kv_capacity_bytes=int(d["kv_capacity_bytes"]),
        kv_bytes_per_token=int(d["kv_bytes_per_token"]),
        weight_bytes=int(d["weight_bytes"]),
        swap_bytes_s=float(d["swap_bytes_s"]),
        cold_load_bytes_s=float(d["cold_load_bytes_s"]),
        inefficiency=float(d["inefficiency"]),
        source=str(d["source"]),
        **overheads,
    )


def profiles_to_json(
    profiles: Sequence[HardwareProfile], report: Mapping[str, Any] | None = None
) -> str:
    """The profile file's text."""
    doc = {
        "format": FILE_FORMAT,
        "version": FILE_VERSION,
        "profiles": [profile_to_dict(p) for p in profiles],
        "report": dict(report or {}),
    }
    return json.dumps(doc, indent=2, sort_keys=False) + "\n"


def profiles_from_json(text: str, where: str = "profile file") -> list[HardwareProfile]:
    """Profiles of a profile file's text (the report is ignored)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{where} is not JSON: {err}") from None
    if not isinstance(doc, dict) or doc.get("format") != FILE_FORMAT:
        raise ValueError(f'{where}.format must be "{FILE_FORMAT}"')
    version = doc.get("version")
    if isinstance(version, bool) or version not in READABLE_VERSIONS:
        readable = ", ".join(map(str, READABLE_VERSIONS))
        raise ValueError(
            f"{where}.version must be one of {readable} (this slomesh reads those), got "
            f"{version!r}: re-create the file with `slomesh profile` or upgrade slomesh"
        )
    items = doc.get("profiles")
    if not isinstance(items, list) or not items:
        raise ValueError(f"{where}.profiles must be a non-empty list")
    return [profile_from_dict(p, f"{where}.profiles[{i}]", version) for i, p in enumerate(items)]


def save_profiles(
    path: Path, profiles: Sequence[HardwareProfile], report: Mapping[str, Any] | None = None
) -> None:
    """Write a profile file (parent folders are created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(profiles_to_json(profiles, report))


def load_profiles(path: Path) -> list[HardwareProfile]:
    """Read a profile file."""
    return profiles_from_json(path.read_text(), where=str(path))
