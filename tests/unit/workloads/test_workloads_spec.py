"""SLO class presets and the pydantic workload specs: validation names the field."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from shared.domain import SLO
from shared.workloads.slo_classes import CLASS_PRESETS, SLOClass, get_slo_class
from shared.workloads.spec import LengthSpec, StreamSpec, WorkloadSpec


@pytest.mark.parametrize(
    ("name", "ttft_s", "tpot_s"),
    [
        ("interactive", 20.0, None),
        ("batch-1", 60.0, None),
        ("batch-2", 3600.0, None),
        ("tight", 0.5, 0.050),
        ("chat", 3.0, 0.030),
        ("relaxed", 15.0, 0.050),
    ],
)
def test_presets_match_the_papers(name: str, ttft_s: float, tpot_s: float | None) -> None:
    slo = get_slo_class(name).to_slo()
    assert slo == SLO(ttft_deadline_s=ttft_s, tpot_target_s=tpot_s, class_name=name)
    assert CLASS_PRESETS[name].name == name


def test_unknown_class_lists_valid_names() -> None:
    with pytest.raises(ValueError, match=r"unknown SLO class 'gold'; valid: .*interactive"):
        get_slo_class("gold")
    with pytest.raises(KeyError, match="batch-1"):
        CLASS_PRESETS["gold"]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"ttft_deadline_s": 0.0}, "ttft_deadline_s"),
        ({"ttft_deadline_s": 1.0, "tpot_target_s": -0.1}, "tpot_target_s"),
        ({"ttft_deadline_s": 1.0, "e2e_deadline_s": 0.0}, "e2e_deadline_s"),
    ],
)
def test_slo_class_validates(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        SLOClass("x", **kwargs)


def stream(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "s",
        "slo_class": "interactive",
        "models": ["m"],
        "rate_rps": 1.0,
    }
    base.update(overrides)
    return base


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"rate_rps": -1.0}, "rate_rps"),
        ({"rate_rps": 0.0}, "rate_rps"),
        ({"rate_rps": float("nan")}, "rate_rps"),
        ({"burstiness_cv": 0.0}, "burstiness_cv"),
        ({"ttft_deadline_s": 0.0}, "ttft_deadline_s"),
        ({"ttft_deadline_s": float("inf")}, "ttft_deadline_s"),
        ({"slo_class": "platinum"}, "slo_class"),
        ({"models": []}, "models"),
        ({"models": [""]}, "models"),
        ({"arrival": "uniform"}, "arrival"),
        ({"trace": "chat"}, "trace"),
        ({"name": ""}, "name"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_stream_validation_names_the_field(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        StreamSpec.model_validate(stream(**overrides))


def test_unknown_slo_class_message_lists_valid() -> None:
    with pytest.raises(ValidationError, match=r"slo_class[\s\S]*unknown SLO class 'platinum'"):
        StreamSpec.model_validate(stream(slo_class="platinum"))


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"streams": [stream()], "requests": 0}, "requests"),
        ({"streams": [], "requests": 5}, "streams"),
        ({"streams": [stream(), stream()], "requests": 5}, "stream names must be unique"),
    ],
)
def test_workload_validation_names_the_field(data: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        WorkloadSpec.model_validate(data)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"source": "fixed", "output_tokens": 5}, "input_tokens is required"),
        ({"source": "fixed", "input_tokens": 5}, "output_tokens is required"),
        ({"source": "uniform", "input_min_tokens": 5}, "input_max_tokens"),
        ({"source": "uniform", "input_min_tokens": 9, "input_max_tokens": 5}, "input_min_tokens"),
        ({"source": "zipf"}, "source"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_input_tokens": 0}, "max_input_tokens"),
        ({"output_source": "fixed"}, "output_source"),
    ],
)
def test_length_validation_names_the_field(data: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        LengthSpec.model_validate(data)


def test_defaults() -> None:
    spec = StreamSpec.model_validate(stream())
    assert spec.arrival == "poisson"
    assert spec.burstiness_cv == 1.0
    assert spec.trace == "conv"
    assert spec.tenant == "default"
    assert spec.lengths == LengthSpec(source="azure-conv", max_input_tokens=4096, max_tokens=2048)


def test_with_total_rate_scales_proportionally() -> None:
    spec = WorkloadSpec.model_validate(
        {
            "streams": [stream(name="a", rate_rps=1.0), stream(name="b", rate_rps=3.0)],
            "requests": 10,
        }
    )
    assert spec.total_rate_rps == 4.0
    scaled = spec.with_total_rate(10.0)
    assert scaled.total_rate_rps == pytest.approx(10.0)
    assert [s.rate_rps for s in scaled.streams] == pytest.approx([2.5, 7.5])
    assert scaled.requests == 10
    assert spec.total_rate_rps == 4.0  # the original is unchanged
    with pytest.raises(ValueError, match="rate_rps must be > 0"):
        spec.with_total_rate(0.0)


def test_round_trips_through_json() -> None:
    spec = WorkloadSpec.model_validate(
        {
            "streams": [
                stream(arrival="gamma", burstiness_cv=3.0),
                stream(
                    name="wc",
                    lengths={
                        "source": "uniform",
                        "input_min_tokens": 3000,
                        "input_max_tokens": 4000,
                    },
                ),
            ],
            "requests": 100,
        }
    )
    assert WorkloadSpec.model_validate_json(spec.model_dump_json()) == spec
    for model in (LengthSpec, StreamSpec, WorkloadSpec):
        for name, info in model.model_fields.items():
            assert info.description, f"{model.__name__}.{name} has no description"
