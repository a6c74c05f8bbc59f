"""Workload profiling: output-length statistics per request group (QLM §6 "workload profiling").

QLM's RWT estimator models the output tokens of the requests ahead in a queue as
N((q−1)·μ_o, (q−1)·σ_o²) with μ_o, σ_o fitted per request group (QLM Eq. 3). A group
here is (model, SLO class). From completion records this computes, per group: count, μ_o (mean),
σ_o (sample standard deviation, ddof = 1; 0 for a single record) and the p50 / p90 output
lengths (linear interpolation between order statistics, numpy's default).

Records are either the simulator's / live mesh's `RequestRecord`s or mappings, one per line of
a JSONL file: {"model": str, "slo_class": str, "output_tokens": int, ...} ("class_name" is
accepted for "slo_class"). Rejected or unfinished requests ("rejected": true, "finished": false
or "finish_s": null) are skipped: their lengths are not output lengths.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from shared.metrics.records import RequestRecord


@dataclass(frozen=True, slots=True)
class GroupWorkload:
    """Output-length statistics of one (model, SLO class) group, in tokens."""

    model: str
    slo_class: str
    count: int
    mean_output_tokens: float
    """μ_o."""
    std_output_tokens: float
    """σ_o (sample standard deviation; 0 for one record)."""
    p50_output_tokens: float
    p90_output_tokens: float


def _from_mapping(rec: Mapping[str, Any], where: str) -> tuple[str, str, int] | None:
    if rec.get("rejected") is True or rec.get("finished") is False:
        return None
    if "finish_s" in rec and rec["finish_s"] is None:
        return None
    cls_key = "slo_class" if "slo_class" in rec else "class_name"
    for key in ("model", cls_key, "output_tokens"):
        if key not in rec:
            raise ValueError(
                f"{where}: missing field '{key}' (need model, slo_class, output_tokens)"
            )
    tokens = rec["output_tokens"]
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise ValueError(f"{where}.output_tokens must be an int >= 0, got {tokens!r}")
    return str(rec["model"]), str(rec[cls_key]), tokens


def workload_profile(
    records: Iterable[Mapping[str, Any] | RequestRecord],
) -> list[GroupWorkload]:
    """Per-group output-length statistics of the finished records, sorted by (model, class)."""
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, rec in enumerate(records):
        if isinstance(rec, RequestRecord):
            if rec.finished:
                groups[(rec.model, rec.class_name)].append(rec.output_tokens)
            continue
        row = _from_mapping(rec, f"record {i}")
        if row is not None:
            groups[(row[0], row[1])].append(row[2])
    out = []
    for (model, cls), lengths in sorted(groups.items()):
        arr = np.asarray(lengths, dtype=np.float64)
        out.append(
            GroupWorkload(
                model=model,
                slo_class=cls,
                count=len(lengths),
                mean_output_tokens=float(arr.mean()),
                std_output_tokens=statistics.stdev(lengths) if len(lengths) > 1 else 0.0,
                p50_output_tokens=float(np.percentile(arr, 50)),
                p90_output_tokens=float(np.percentile(arr, 90)),
            )
        )
    return out


def parse_records_jsonl(lines: Iterable[str], where: str = "records") -> list[dict[str, Any]]:
    """The JSON objects of a JSONL text (blank lines skipped); errors name the line."""
    out = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{where}:{n}: not JSON: {err}") from None
        if not isinstance(obj, dict):
            raise ValueError(f"{where}:{n}: expected a JSON object, got {type(obj).__name__}")
        out.append(obj)
    return out
