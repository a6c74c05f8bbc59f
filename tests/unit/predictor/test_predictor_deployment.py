"""The predictor shell: the shipped learned model by default, prompt-aware Predict, Observe, and
Batch (many of both in one call) doing exactly what the single calls do, in order."""

from __future__ import annotations

import asyncio

import pytest

from services.predictor.deployment import PredictorArgs, PredictorDeployment
from shared.domain import SLO, Request
from shared.rpc.convert import request_to_meta
from shared.rpc.slomesh.v1 import common_pb2, predictor_pb2


@pytest.fixture(scope="module")
def shell():
    return PredictorDeployment.func_or_class({})  # the class under @serve.deployment


def _meta(max_tokens: int = 2048, request_id: str = "r1"):
    return request_to_meta(Request(request_id, "gpt-4-0613", 30, max_tokens, 0.0, SLO(1.0)))


def test_predictor_shell_defaults_to_the_shipped_learned_model(shell):
    assert PredictorArgs().predictor == "learned"
    assert shell.core.name == "learned"


def test_predictor_shell_uses_the_prompt(shell):
    long = asyncio.run(
        shell.Predict(
            predictor_pb2.PredictRequest(
                meta=_meta(),
                prompt="Write a detailed, multi-section essay with code examples on how to "
                "implement a distributed key-value store, covering replication and consensus.",
            )
        )
    )
    short = asyncio.run(
        shell.Predict(
            predictor_pb2.PredictRequest(meta=_meta(), prompt="Answer yes or no: is 7 prime?")
        )
    )
    assert long.predictor_version.startswith("learned:")
    assert long.mean_tokens > short.mean_tokens
    assert abs(sum(long.bucket_probs) - 1) < 1e-6


def test_predictor_shell_observe_counts(shell):
    before = shell.core.observations
    reply = asyncio.run(shell.Observe(predictor_pb2.Observation(meta=_meta(), output_tokens=120)))
    assert reply.observations == before + 1


def test_predictor_args_model_path_needs_learned():
    with pytest.raises(ValueError, match="model_path is only for predictor 'learned'"):
        PredictorArgs(predictor="online-histogram", model_path="x.npz")


PROMPTS = [
    "Write a long story about a dragon who learns to code, with dialogue.",
    "Answer yes or no: is 7 prime?",
    "Translate to French: good morning",
    "List 10 facts about the moon, one line each.",
]
# (kind, request index, output tokens): a prediction, later its completion; a completion whose
# request was never predicted here (learned from its prompt-less row); repeated predictions
SCRIPTS = {
    "predict then observe": [("p", 0, 0), ("p", 1, 0), ("o", 0, 700), ("o", 1, 2)],
    "interleaved": [("p", 0, 0), ("o", 0, 500), ("p", 2, 0), ("p", 3, 0), ("o", 3, 300)],
    "observe without predict": [("o", 1, 40), ("o", 2, 9), ("p", 0, 0), ("o", 0, 64)],
}


def _items(script):
    items = []
    for kind, i, tokens in script:
        meta = _meta(request_id=f"q{i}")
        if kind == "p":
            work = predictor_pb2.PredictorWork(
                predict=predictor_pb2.PredictRequest(meta=meta, prompt=PROMPTS[i])
            )
        else:
            work = predictor_pb2.PredictorWork(
                observe=predictor_pb2.Observation(meta=meta, output_tokens=tokens)
            )
        items.append(work)
    return items


def _probe(shell) -> list[float]:
    """What later predictions look like after the script (the state the script left)."""
    out = []
    for prompt in PROMPTS:
        meta = _meta(request_id="probe")
        reply = asyncio.run(shell.Predict(predictor_pb2.PredictRequest(meta=meta, prompt=prompt)))
        out.append(reply.mean_tokens)
    return out


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_batch_learns_exactly_what_the_single_calls_learn(name):
    """The same items one call at a time and in one Batch leave the core in the same state."""
    single = PredictorDeployment.func_or_class({})
    batched = PredictorDeployment.func_or_class({})
    items = _items(SCRIPTS[name])
    for item in items:
        if item.WhichOneof("work") == "predict":
            asyncio.run(single.Predict(item.predict))
        else:
            asyncio.run(single.Observe(item.observe))
    reply = asyncio.run(batched.Batch(predictor_pb2.PredictorBatch(items=items)))
    assert reply.done == len(items)
    assert reply.observations == single.core.observations == batched.core.observations
    assert _probe(batched) == _probe(single)


def test_batch_skips_a_bad_item_and_runs_the_rest():
    shell = PredictorDeployment.func_or_class({})
    bad = common_pb2.RequestMeta(request_id="bad", model="m")  # no SLO: refused by Request
    items = [
        predictor_pb2.PredictorWork(observe=predictor_pb2.Observation(meta=bad, output_tokens=3)),
        predictor_pb2.PredictorWork(),  # no work at all
        *_items([("o", 1, 12)]),
    ]
    before = shell.core.observations
    reply = asyncio.run(shell.Batch(predictor_pb2.PredictorBatch(items=items)))
    assert reply.done == 1
    assert reply.observations == before + 1


@pytest.mark.parametrize(
    "prompts",
    [[PROMPTS[0]], PROMPTS, [None, PROMPTS[1], None], [PROMPTS[2], PROMPTS[2], PROMPTS[3]]],
)
def test_predict_many_is_predicting_each_in_turn(prompts):
    """The Batch's pass over a run of predictions gives what one call each gives."""
    from services.predictor import online

    one = PredictorDeployment.func_or_class({}).core
    many = PredictorDeployment.func_or_class({}).core
    reqs = [Request(f"m{i}", "gpt-4-0613", 30 + i, 512, 0.0, SLO(1.0)) for i in range(len(prompts))]
    singles = [online.predict(one, r, p) for r, p in zip(reqs, prompts, strict=True)]
    batched = online.predict_many(many, reqs, prompts)
    for a, b in zip(singles, batched, strict=True):
        assert a.bucket_probs == pytest.approx(b.bucket_probs, rel=1e-12, abs=1e-15)
        assert (a.mean_tokens, a.version) == pytest.approx((b.mean_tokens, b.version))


def test_the_service_learns_in_large_batches_unless_its_config_names_one():
    assert PredictorDeployment.func_or_class({}).core.config.online_batch_size == 2048
    args = {"live_batch_size": 64}
    assert PredictorDeployment.func_or_class(args).core.config.online_batch_size == 64
    named = {"live_batch_size": 64, "config": {"online_batch_size": 8}}
    assert PredictorDeployment.func_or_class(named).core.config.online_batch_size == 8
    assert PredictorArgs(predictor="online-histogram").core_config() is None


def test_a_timed_pass_learns_what_is_buffered_however_few():
    """The buffered completions reach the weights at the timer's pass, not at the batch's end;
    a pass with nothing buffered changes nothing."""
    shell = PredictorDeployment.func_or_class({})
    w_before = shell.core.ordinal.weights()[0].copy()
    asyncio.run(shell.Batch(predictor_pb2.PredictorBatch(items=_items(SCRIPTS["interleaved"]))))
    assert shell.core.pending == 2 and shell.core.online_batches == 0
    assert shell.learn_buffered() == 2
    assert shell.core.pending == 0 and shell.core.online_batches == 1
    assert not (shell.core.ordinal.weights()[0] == w_before).all()
    assert shell.learn_buffered() == 0 and shell.core.online_batches == 1


def test_the_timer_starts_with_the_first_completion_and_only_when_set():
    async def run(args):
        shell = PredictorDeployment.func_or_class(args)
        assert shell._learner is None  # nothing runs before a completion
        await shell.Observe(_items([("o", 1, 12)])[0].observe)
        started = shell._learner is not None
        if started:
            shell._learner.cancel()
        return started

    assert asyncio.run(run({}))
    assert not asyncio.run(run({"learn_interval_s": None}))
