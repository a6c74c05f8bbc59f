"""Internal RPCs answer INVALID_ARGUMENT, naming the method, field and rule, for a message the
domain refuses (the caller's mistake), never INTERNAL."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from grpc_fakes import FakeContext

from services.predictor.deployment import PredictorDeployment
from shared.domain import SLO, Request
from shared.rpc.convert import request_to_meta
from shared.rpc.invalid_argument import InvalidMessage, request_or_refuse
from shared.rpc.mesh_auth import MESH_TOKEN_ENV, MESH_TOKEN_METADATA
from shared.rpc.slomesh.v1 import common_pb2, predictor_pb2


def _good_meta() -> common_pb2.RequestMeta:
    return request_to_meta(Request("r1", "llama-3.1-8b", 30, 64, 0.0, SLO(1.0)))


def _broken(**fields: Any) -> common_pb2.RequestMeta:
    meta = _good_meta()
    for name, value in fields.items():
        if name == "no_slo":
            meta.ClearField("slo")
        else:
            setattr(meta, name, value)
    return meta


@pytest.mark.parametrize(
    ("meta", "rule"),
    [
        (_broken(no_slo=True), "slo.ttft_deadline_s must be > 0"),  # exposure.py's message
        (_broken(arrival_unix_s=-5.0), "request.arrival_s must be >= 0"),
        (_broken(tenant_weight=float("inf")), "request.tenant_weight must be > 0"),
    ],
)
def test_a_message_breaking_a_domain_rule_is_invalid_argument(
    meta: common_pb2.RequestMeta, rule: str
) -> None:
    ctx = FakeContext()
    with pytest.raises(InvalidMessage, match=r"scheduler\.Admit: invalid message"):
        request_or_refuse(meta, ctx, "scheduler.Admit")
    assert ctx.code == grpc.StatusCode.INVALID_ARGUMENT
    assert rule in ctx.details


def test_a_good_message_converts_and_sets_no_status() -> None:
    ctx = FakeContext()
    req = request_or_refuse(_good_meta(), ctx, "scheduler.Admit", true_output_tokens=7)
    assert (req.request_id, req.true_output_tokens) == ("r1", 7)
    assert ctx.code is None


def test_out_of_range_counts_are_clamped_not_refused() -> None:
    # zero input/max tokens mean "unknown" on the wire and become 1, as before this check
    req = request_or_refuse(_broken(input_tokens=0, max_tokens=0), FakeContext(), "x")
    assert (req.input_tokens, req.max_tokens) == (1, 1)


@pytest.mark.parametrize("method", ["Predict", "Observe"])
def test_the_predictor_shell_refuses_a_bad_message_with_invalid_argument(
    monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    monkeypatch.setenv(MESH_TOKEN_ENV, "s3cret")
    shell = PredictorDeployment.func_or_class({})  # the class under @serve.deployment
    ctx = FakeContext([(MESH_TOKEN_METADATA, "s3cret")])
    message = (
        predictor_pb2.PredictRequest(meta=_broken(no_slo=True), prompt="hi")
        if method == "Predict"
        else predictor_pb2.Observation(meta=_broken(no_slo=True), output_tokens=3)
    )
    before = shell.core.observations
    with pytest.raises(InvalidMessage):
        asyncio.run(getattr(shell, method)(message, grpc_context=ctx))
    assert ctx.code == grpc.StatusCode.INVALID_ARGUMENT
    assert f"predictor.{method}" in ctx.details
    assert shell.core.observations == before  # nothing learned from a refused message
