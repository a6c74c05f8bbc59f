"""The live predictor deployment learns a new model's habits from its Observe RPC.

A model unseen in training ("brief-7b-live") answers real arena-hard prompts in the opposite way
to the models the shipped predictor knows: the longer the prompt, the shorter its answer
(output ~ 20,000 / (input + 20) tokens, +-25% seeded noise). A probe set of prompts is predicted
before and after a stream of other prompts goes through Predict then Observe (the steps of
services/predictor/online.py, which `slomesh predictor replay` runs too); Kendall tau of the
probe's predicted means against its true lengths must rise.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
from scipy.stats import kendalltau

from services.predictor.core.learned.dataset import approx_tokens
from services.predictor.data import ARENA_FILE, DEFAULT_DATA_DIR, load_arena_hard
from shared.rpc.slomesh.v1 import common_pb2, predictor_pb2
from tests.integration.handles import HandleStub

MODEL = "brief-7b-live"
TENANT = "live-learning-test"
PROBE = 150
STREAM = 640


def _habit(input_tokens: int, rng: random.Random) -> int:
    return min(4000, max(5, round(20000 / (input_tokens + 20) * rng.uniform(0.8, 1.25))))


def _meta(rid: str, prompt: str) -> common_pb2.RequestMeta:
    return common_pb2.RequestMeta(
        request_id=rid,
        model=MODEL,
        input_tokens=approx_tokens(prompt),
        max_tokens=8192,
        slo=common_pb2.Slo(ttft_slo_ms=1000.0),
        tenant=TENANT,
    )


def _probe_tau(
    stub: Any, md: list[tuple[str, str]], probe: list[tuple[str, int]], tag: str
) -> float:
    means = [
        stub.Predict(
            predictor_pb2.PredictRequest(meta=_meta(f"{tag}-{i}", p), prompt=p),
            metadata=md,
            timeout=10,
        ).mean_tokens
        for i, (p, _) in enumerate(probe)
    ]
    return float(kendalltau(means, [y for _, y in probe]).statistic)


@pytest.mark.mesh
def test_live_predictor_learns_an_unseen_models_habit(live_mesh: dict[str, Any]) -> None:
    path = DEFAULT_DATA_DIR / ARENA_FILE
    if not path.is_file():
        pytest.skip(f"{path} is not here (../shared/data)")
    rng = random.Random(14)
    prompts = list(dict.fromkeys(e.prompt for e in load_arena_hard(path)))
    rng.shuffle(prompts)
    lines = [(p, _habit(approx_tokens(p), rng)) for p in prompts[: PROBE + STREAM]]
    probe, stream = lines[:PROBE], lines[PROBE:]
    md: list[tuple[str, str]] = []
    stub = HandleStub("predictor")  # over its Serve handle: Serve's gRPC proxy is off
    before = _probe_tau(stub, md, probe, "probe-before")
    observed = []
    for i, (p, y) in enumerate(stream):
        meta = _meta(f"live-learn-{i}", p)
        stub.Predict(predictor_pb2.PredictRequest(meta=meta, prompt=p), metadata=md, timeout=10)
        reply = stub.Observe(
            predictor_pb2.Observation(meta=meta, output_tokens=y), metadata=md, timeout=10
        )
        observed.append(reply.observations)
    after = _probe_tau(stub, md, probe, "probe-after")
    print(f"probe tau before {before:.3f}, after {len(stream)} observations {after:.3f}")
    assert all(b > a for a, b in itertools.pairwise(observed))
    assert after >= before + 0.2
    assert after >= 0.5
