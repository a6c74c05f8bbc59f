"""The learned model's file format, as bytes (the caller does any file I/O).

An uncompressed-pickle-free `.npz` (numpy's zip of arrays, written compressed, read with
allow_pickle=False): the float32 threshold coefficients and intercepts, SGD step counters, bucket
centres, any pending online mini-batch (CSR arrays), the online layer's learned state (version 3:
`layer_*` arrays, online_layer.py) and `meta_json`, the UTF-8 JSON metadata as a uint8 array
(version 4: with the online p90 calibration's per-model state, `conformal`, conformal.py). The
metadata carries FORMAT_VERSION, which `decode` checks: version 4 files are written; version 3
files (no p90 calibration state: it starts at no stretch), version 2 files (no online layer
state either: the layer starts empty) and version 1 files (before the instruction features,
whose feature config has no `feature_version`, read as feature_version 1) still load; any other
version is refused.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

FORMAT = "slomesh-learned-length-predictor"
FORMAT_VERSION = 4
"""Layout version of the model files written; decode reads READABLE_VERSIONS."""

READABLE_VERSIONS = (1, 2, 3, 4)
"""Model file versions decode accepts (1: feature_version 1 implied; 1 and 2: no layer state;
1 to 3: no p90 calibration state)."""

_META = "meta_json"


def encode(arrays: Mapping[str, NDArray[np.generic]], meta: Mapping[str, Any]) -> bytes:
    """Model file bytes for these arrays and JSON-able metadata (format and version added)."""
    if _META in arrays:
        raise ValueError(f"model file: array name '{_META}' is reserved")
    body = {"format": FORMAT, "format_version": FORMAT_VERSION, **meta}
    blob = np.frombuffer(json.dumps(body, sort_keys=True).encode(), dtype=np.uint8)
    payload: dict[str, Any] = {_META: blob, **arrays}
    buf = io.BytesIO()
    np.savez_compressed(buf, **payload)
    return buf.getvalue()


def decode(data: bytes) -> tuple[dict[str, NDArray[np.generic]], dict[str, Any]]:
    """(arrays, metadata) of model file bytes; refuses other formats and versions."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except (ValueError, OSError, EOFError) as e:
        raise ValueError(f"model file: not a readable .npz ({e})") from e
    if _META not in arrays:
        raise ValueError(f"model file: no '{_META}' entry")
    meta = json.loads(arrays.pop(_META).tobytes().decode())
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"model file: format must be '{FORMAT}'")
    version = meta.get("format_version")
    if version not in READABLE_VERSIONS:
        raise ValueError(
            f"model file: format_version must be one of {list(READABLE_VERSIONS)}, "
            f"got {version!r} (retrain with `slomesh predictor train`)"
        )
    if version == 1 and isinstance(meta.get("features"), dict):
        meta["features"] = {"feature_version": 1, **meta["features"]}
    return arrays, meta
