"""`slomesh predictor replay`: prequential metrics, bad input, one path with the service."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from services.predictor import online
from services.predictor.core.learned.predictor import LearnedPredictor
from services.predictor.core.registry import create_predictor
from services.predictor.deployment import PredictorDeployment
from shared.domain import SLO, Request
from shared.rpc.convert import request_to_meta
from shared.rpc.slomesh.v1 import predictor_pb2
from slomesh.cli.main import main
from slomesh.cli.predictor_replay import ReplayInput, curve_path, replay_lines


def stream(n: int) -> list[dict[str, Any]]:
    """Short answers to yes/no questions, long ones to essays, alternating."""
    lines = []
    for i in range(n):
        if i % 2:
            lines.append({"prompt": f"Answer yes or no: is {i} prime?", "output_tokens": 4 + i % 3})
        else:
            lines.append(
                {"prompt": f"Write a long essay on topic {i}.", "model": "m", "output_tokens": 600}
            )
    return lines


def write_jsonl(path: Path, objs: list[Any], raw: dict[int, str] | None = None) -> Path:
    lines = [json.dumps(o) for o in objs]
    for i, text in (raw or {}).items():
        lines[i] = text
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_prequential_metrics_halves_and_sliding_tau() -> None:
    pred = [1.0, 2.0, 3.0, 4.0, 4.0, 3.0, 2.0, 1.0]
    true = [1, 2, 3, 4, 1, 2, 3, 4]
    first, second = online.halves(pred, true)
    assert (first.first_line, first.last_line, second.first_line, second.last_line) == (1, 4, 5, 8)
    assert first.kendall_tau == pytest.approx(1.0) and second.kendall_tau == pytest.approx(-1.0)
    assert first.mae_tokens == 0.0 and second.mae_tokens == pytest.approx(2.0)
    curve = online.sliding_tau(pred, true, window=4, step=2)
    assert [e for e, _ in curve] == [4, 6, 8]
    assert curve[0][1] == pytest.approx(1.0) and curve[-1][1] == pytest.approx(-1.0)
    assert online.halves([5.0, 5.0], [1, 2])[0].kendall_tau is None  # undefined: n/a


def test_replay_round_trip_prints_halves_and_draws_the_curve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objs = stream(40)
    src = write_jsonl(tmp_path / "in.jsonl", objs)
    out = tmp_path / "out.jsonl"
    args = ["predictor", "replay", "--in", str(src), "--out", str(out), "--window", "10"]
    assert main([*args, "--predictor", "online-histogram", "--model-name", "mm"]) == 0
    text = capsys.readouterr().out
    assert "first half:  lines 1-20" in text and "second half: lines 21-40" in text
    assert "Kendall tau" in text and "MAE" in text
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == len(objs)
    for inp, row in zip(objs, rows, strict=True):
        assert {k: row[k] for k in inp} == inp
        assert row["p50_tokens"] <= row["p90_tokens"] and row["mean_tokens"] > 0
    assert rows[-1]["predictor_version"].endswith("39")  # predicted before its own observation
    assert curve_path(out).name == "out.curve.png" and curve_path(out).stat().st_size > 0


def test_replay_learns_online_with_the_learned_predictor(small: LearnedPredictor) -> None:
    objs = stream(64)
    inputs = [(o, ReplayInput.model_validate(o)) for o in objs]
    before = small.observations
    dists = replay_lines(small, inputs)
    assert small.observations == before + len(objs)
    assert small.online_batches >= 1
    means = [d.mean_tokens for d in dists]
    second = online.halves(means, [o["output_tokens"] for o in objs])[1]
    assert second.kendall_tau is not None and second.kendall_tau > 0.5


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ('{"prompt": "x"}', ["line 2", "output_tokens", "required"]),
        ('{"prompt": "x", "output_tokens": 0}', ["line 2", "output_tokens", "greater than"]),
        ('{"prompt": "x", "output_tokens": "9"}', ["line 2", "output_tokens", "integer"]),
        ('{"model": "m", "output_tokens": 3}', ["line 2", "prompt", "required"]),
        ('{"prompt": "x", "output_tokens": 3, "max_tokens": 0}', ["line 2", "max_tokens"]),
        ('{"prompt": "x",', ["line 2", "not valid JSON"]),
        ('["prompt"]', ["line 2", "JSON object"]),
    ],
)
def test_bad_replay_line_names_line_and_field_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str, words: list[str]
) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", stream(3), raw={1: bad})
    out = tmp_path / "out.jsonl"
    args = ["predictor", "replay", "--in", str(src), "--out", str(out)]
    assert main([*args, "--predictor", "online-histogram"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("slomesh predictor: error:")
    for w in words:
        assert w in err
    assert not out.exists() and not curve_path(out).exists()


def test_deployment_and_replay_run_the_same_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str]] = []
    real_predict, real_observe = online.predict, online.observe

    def spy_predict(core: Any, request: Request, prompt: str | None) -> Any:
        calls.append(("predict", request.request_id))
        return real_predict(core, request, prompt)

    def spy_observe(core: Any, request: Request, output_tokens: int) -> int:
        calls.append(("observe", request.request_id))
        return real_observe(core, request, output_tokens)

    monkeypatch.setattr(online, "predict", spy_predict)
    monkeypatch.setattr(online, "observe", spy_observe)
    shell = PredictorDeployment.func_or_class({"predictor": "online-histogram"})
    meta = request_to_meta(Request("r1", "m", 30, 512, 0.0, SLO(1.0)))
    asyncio.run(shell.Predict(predictor_pb2.PredictRequest(meta=meta, prompt="hi")))
    reply = asyncio.run(shell.Observe(predictor_pb2.Observation(meta=meta, output_tokens=0)))
    assert reply.observations == 1
    meta2 = request_to_meta(Request("r2", "m", 30, 512, 0.0, SLO(1.0)))
    batch = [  # the ingress's batched calls: the same steps, in order
        predictor_pb2.PredictorWork(predict=predictor_pb2.PredictRequest(meta=meta2, prompt="x")),
        predictor_pb2.PredictorWork(observe=predictor_pb2.Observation(meta=meta2, output_tokens=5)),
    ]
    assert asyncio.run(shell.Batch(predictor_pb2.PredictorBatch(items=batch))).observations == 2
    objs = stream(2)
    core = create_predictor("online-histogram")
    replay_lines(core, [(o, ReplayInput.model_validate(o)) for o in objs])
    assert calls == [
        ("predict", "r1"),
        ("observe", "r1"),
        ("predict", "r2"),
        ("observe", "r2"),
        ("predict", "line-1"),
        ("observe", "line-1"),
        ("predict", "line-2"),
        ("observe", "line-2"),
    ]
