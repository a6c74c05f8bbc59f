"""The predictor shell: the shipped learned model by default, prompt-aware Predict, Observe."""

from __future__ import annotations

import pytest

from services.predictor.deployment import PredictorArgs, PredictorDeployment
from shared.domain import SLO, Request
from shared.rpc.convert import request_to_meta
from shared.rpc.slomesh.v1 import predictor_pb2


@pytest.fixture(scope="module")
def shell():
    return PredictorDeployment.func_or_class({})  # the class under @serve.deployment


def _meta(max_tokens: int = 2048):
    return request_to_meta(Request("r1", "gpt-4-0613", 30, max_tokens, 0.0, SLO(1.0)))


def test_predictor_shell_defaults_to_the_shipped_learned_model(shell):
    assert PredictorArgs().predictor == "learned"
    assert shell.core.name == "learned"


def test_predictor_shell_uses_the_prompt(shell):
    long = shell.Predict(
        predictor_pb2.PredictRequest(
            meta=_meta(),
            prompt="Write a detailed, multi-section essay with code examples on how to "
            "implement a distributed key-value store, covering replication and consensus.",
        )
    )
    short = shell.Predict(
        predictor_pb2.PredictRequest(meta=_meta(), prompt="Answer yes or no: is 7 prime?")
    )
    assert long.predictor_version.startswith("learned:")
    assert long.mean_tokens > short.mean_tokens
    assert abs(sum(long.bucket_probs) - 1) < 1e-6


def test_predictor_shell_observe_counts(shell):
    before = shell.core.observations
    reply = shell.Observe(predictor_pb2.Observation(meta=_meta(), output_tokens=120))
    assert reply.observations == before + 1


def test_predictor_args_model_path_needs_learned():
    with pytest.raises(ValueError, match="model_path is only for predictor 'learned'"):
        PredictorArgs(predictor="online-histogram", model_path="x.npz")
