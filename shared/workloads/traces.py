"""The Azure LLM inference traces 2023, loaded from this package's data folder.

Two one-hour production traces (Patel et al., "Splitwise", ISCA 2024; CC-BY-4.0, see
`data/ATTRIBUTION.md`): "conv" (conversation, 19,366 requests) and "code" (code completion, 8,819
requests), each row `TIMESTAMP,ContextTokens,GeneratedTokens`. The files ship gzipped inside the
package and are read through `importlib.resources`: nothing outside the installed package is needed.
Nothing is read at import time; `load_azure_trace` caches each parsed trace for the process.
"""

from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Literal, get_args

import numpy as np
from numpy.typing import ArrayLike, NDArray

TraceName = Literal["conv", "code"]
TRACE_NAMES: tuple[str, ...] = get_args(TraceName)
_HEADER = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_NS_PER_S = 1e9


@dataclass(frozen=True, eq=False)
class AzureTrace:
    """One parsed trace; the arrays are read-only and share one row order, sorted by arrival.

    name: "conv" or "code".
    offsets_s: arrival time of each request in seconds after the trace's first request (float64,
        non-decreasing, offsets_s[0] == 0).
    input_tokens: context (prompt) tokens of each request (int64).
    output_tokens: generated tokens of each request (int64).
    """

    name: str
    offsets_s: NDArray[np.float64]
    input_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]

    def __len__(self) -> int:
        return int(self.offsets_s.shape[0])

    @property
    def duration_s(self) -> float:
        """Seconds from the first to the last request."""
        return float(self.offsets_s[-1] - self.offsets_s[0])

    @property
    def mean_rate_rps(self) -> float:
        """Requests per second over the trace: (rows - 1) gaps over its duration."""
        return (len(self) - 1) / self.duration_s


def _parse_timestamps_ns(stamps: Sequence[str]) -> NDArray[np.int64]:
    """Parse 'YYYY-MM-DD HH:MM:SS.fffffff' (any number of fractional digits) to integer ns.

    The whole seconds go through numpy's ISO parser; the fraction is padded or truncated to nine
    digits by hand, so seven-digit (100 ns) fractions and missing fractions both parse exactly.
    """
    whole: list[str] = []
    frac_ns: list[int] = []
    for i, raw in enumerate(stamps):
        text = raw.strip()
        head, _, frac = text.partition(".")
        if frac and not frac.isdigit():
            raise ValueError(f"row {i + 1}: bad fractional seconds in timestamp {raw!r}")
        whole.append(head)
        frac_ns.append(int((frac + "000000000")[:9]) if frac else 0)
    try:
        seconds = np.array(whole, dtype="datetime64[s]").astype(np.int64)
    except ValueError as exc:
        raise ValueError(f"unparseable timestamp in trace: {exc}") from exc
    return seconds * 1_000_000_000 + np.asarray(frac_ns, dtype=np.int64)


def parse_azure_csv(text: str, name: str = "custom") -> AzureTrace:
    """Parse the CSV text of an Azure trace (header `TIMESTAMP,ContextTokens,GeneratedTokens`)."""
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None or tuple(h.strip() for h in header) != _HEADER:
        raise ValueError(f"trace {name}: expected header {','.join(_HEADER)}, got {header}")
    stamps: list[str] = []
    inputs: list[int] = []
    outputs: list[int] = []
    for row in reader:
        if not row:
            continue
        if len(row) != 3:
            raise ValueError(f"trace {name}: expected 3 columns, got {row}")
        stamps.append(row[0])
        inputs.append(int(row[1]))
        outputs.append(int(row[2]))
    if len(stamps) < 2:
        raise ValueError(f"trace {name}: needs at least 2 rows, got {len(stamps)}")
    ns = _parse_timestamps_ns(stamps)
    order = np.argsort(ns, kind="stable")
    ns = ns[order]
    offsets = ((ns - ns[0]).astype(np.float64) / _NS_PER_S).astype(np.float64)
    in_arr = np.asarray(inputs, dtype=np.int64)[order]
    out_arr = np.asarray(outputs, dtype=np.int64)[order]
    for arr in (offsets, in_arr, out_arr):
        arr.setflags(write=False)
    return AzureTrace(name=name, offsets_s=offsets, input_tokens=in_arr, output_tokens=out_arr)


def trace_resource_name(name: str) -> str:
    """File name of a packaged trace inside `shared/workloads/data/`."""
    return f"AzureLLMInferenceTrace_{name}.csv.gz"


@lru_cache(maxsize=4)
def load_azure_trace(name: TraceName) -> AzureTrace:
    """Load a packaged Azure trace by name ("conv" or "code"); parsed once per process."""
    if name not in TRACE_NAMES:
        raise ValueError(f"unknown Azure trace '{name}'; valid: {', '.join(TRACE_NAMES)}")
    blob = resources.files("shared.workloads").joinpath("data", trace_resource_name(name))
    text = gzip.decompress(blob.read_bytes()).decode("utf-8-sig")
    return parse_azure_csv(text, name=name)


def quantiles(values: ArrayLike, qs: Sequence[float] = (0.5, 0.9, 0.99)) -> dict[float, float]:
    """Empirical quantiles {q: value} of `values` (numpy's default linear interpolation)."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        raise ValueError("values must be non-empty")
    for q in qs:
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"qs must lie in [0, 1], got {q}")
    got = np.quantile(arr, np.asarray(qs, dtype=np.float64))
    return {float(q): float(v) for q, v in zip(qs, got, strict=True)}
