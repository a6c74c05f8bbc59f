"""The packaged Azure traces load from the package (not ../shared) and parse exactly."""

from __future__ import annotations

import gzip
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from shared.workloads.traces import (
    AzureTrace,
    load_azure_trace,
    parse_azure_csv,
    quantiles,
    trace_resource_name,
)

# The files have no trailing newline, so `wc -l` shows one line fewer than header + rows.
ROWS = {"conv": 19_366, "code": 8_819}
SHARED_DATA = Path(__file__).resolve().parents[4] / "shared" / "data" / "azure-llm-2023"
DATA = resources.files("shared.workloads").joinpath("data")


@pytest.mark.parametrize(("name", "rows"), sorted(ROWS.items()))
def test_packaged_trace_loads_with_row_counts(name: str, rows: int) -> None:
    trace = load_azure_trace(name)  # type: ignore[arg-type]
    assert isinstance(trace, AzureTrace)
    assert len(trace) == rows
    assert trace.input_tokens.shape == trace.output_tokens.shape == (rows,)
    assert trace.offsets_s.dtype == np.float64
    assert trace.input_tokens.dtype == trace.output_tokens.dtype == np.int64
    assert trace.offsets_s[0] == 0.0
    assert np.all(np.diff(trace.offsets_s) >= 0)
    assert 3_000 < trace.duration_s <= 3_600  # "one hour"
    assert trace.input_tokens.min() >= 1 and trace.output_tokens.min() >= 1


@pytest.mark.parametrize("name", sorted(ROWS))
def test_packaged_files_present_with_license(name: str) -> None:
    assert DATA.joinpath(trace_resource_name(name)).is_file()
    assert DATA.joinpath("LICENSE").read_text(encoding="utf-8-sig").startswith("Attribution 4.0")
    attribution = DATA.joinpath("ATTRIBUTION.md").read_text(encoding="utf-8")
    for needle in ("AzurePublicDataset", "b469a11", "CC-BY-4.0", "Splitwise", "ISCA 2024"):
        assert needle in attribution


@pytest.mark.parametrize("name", sorted(ROWS))
def test_packaged_file_is_the_original_gzipped_unchanged(name: str) -> None:
    original = SHARED_DATA / f"AzureLLMInferenceTrace_{name}.csv"
    if not original.is_file():
        pytest.skip("../shared/data not available")
    packaged = gzip.decompress(DATA.joinpath(trace_resource_name(name)).read_bytes())
    assert packaged == original.read_bytes()


def test_first_rows_parse_exactly() -> None:
    conv = load_azure_trace("conv")
    # 2023-11-16 18:15:46.6805900,374,44 then 18:15:50.9951690,396,109
    assert conv.input_tokens[:2].tolist() == [374, 396]
    assert conv.output_tokens[:2].tolist() == [44, 109]
    assert conv.offsets_s[1] == pytest.approx(4.314579, abs=1e-9)


def test_load_is_cached_and_read_only() -> None:
    assert load_azure_trace("code") is load_azure_trace("code")
    with pytest.raises(ValueError):
        load_azure_trace("code").input_tokens[0] = 1


def test_unknown_trace_lists_valid_names() -> None:
    with pytest.raises(ValueError, match="conv, code"):
        load_azure_trace("chat")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("stamps", "expected_s"),
    [
        (["2023-11-16 18:00:00.0000000", "2023-11-16 18:00:01.2500000"], [0.0, 1.25]),
        (["2023-11-16 18:00:00", "2023-11-16 18:00:00.5"], [0.0, 0.5]),
        (["2023-11-16 23:59:59.9999999", "2023-11-17 00:00:00.0000001"], [0.0, 2e-7]),
        (["2023-11-16 18:00:02.000000000", "2023-11-16 18:00:01.000000000"], [0.0, 1.0]),
    ],
)
def test_parse_timestamps_robustly(stamps: list[str], expected_s: list[float]) -> None:
    text = "TIMESTAMP,ContextTokens,GeneratedTokens\r\n" + "\r\n".join(
        f"{s},{i + 10},{i + 1}" for i, s in enumerate(stamps)
    )
    trace = parse_azure_csv(text)
    assert trace.offsets_s.tolist() == pytest.approx(expected_s, abs=1e-12)
    if stamps[0] > stamps[1]:  # unsorted input is sorted, rows kept together
        assert trace.input_tokens.tolist() == [11, 10]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a,b,c\n2023-11-16 18:00:00,1,1\n2023-11-16 18:00:01,1,1", "expected header"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00,1,1", "at least 2"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00.x,1,1\nb,1,1", "fraction"),
    ],
)
def test_parse_rejects_bad_csv(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_azure_csv(text)


def test_quantiles_helper() -> None:
    assert quantiles(np.arange(101), (0.5, 0.9)) == {0.5: 50.0, 0.9: 90.0}
    with pytest.raises(ValueError, match="qs"):
        quantiles([1, 2], (1.5,))
