"""`slomesh predictor`: predict round trip, bad input lines, and train/eval on a tiny data dir."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from learned_fixtures import TOPICS, long_prompt, short_prompt

from slomesh.cli.main import main

INPUT = [
    {"id": "a", "prompt": long_prompt("comets"), "model": "gpt-4-0314"},
    {"prompt": "Answer yes or no: is 7 prime?", "max_tokens": 20, "slo_class": "interactive"},
    {"prompt": "Write a Python web server with tests.", "tenant": "t1", "extra": [1, 2]},
]


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_predict_round_trip_keeps_order_and_adds_fields(tmp_path: Path) -> None:
    src = write_lines(tmp_path / "in.jsonl", [json.dumps(o) for o in INPUT])
    out = tmp_path / "out.jsonl"
    assert main(["predictor", "predict", "--in", str(src), "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == len(INPUT)
    for inp, row in zip(INPUT, rows, strict=True):
        assert {k: row[k] for k in inp} == inp  # the input object, unchanged
        for key in ("mean_tokens", "p50_tokens", "p90_tokens", "bucket_upper_tokens"):
            assert key in row
        assert abs(sum(row["bucket_probs"]) - 1.0) < 1e-6
        assert row["predictor_version"].startswith("learned:")
        assert row["p50_tokens"] <= row["p90_tokens"]
    assert rows[1]["p90_tokens"] <= 20  # capped by max_tokens


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ('{"model": "m"}', ["line 2", "prompt", "required"]),
        ('{"prompt": 5}', ["line 2", "prompt", "string"]),
        ('{"prompt": ""}', ["line 2", "prompt"]),
        ('{"prompt": "x", "max_tokens": 0}', ["line 2", "max_tokens", "greater than or equal"]),
        ('{"prompt": "x", "max_tokens": "12"}', ["line 2", "max_tokens", "integer"]),
        ('{"prompt": "x", "tenant": null}', ["line 2", "tenant"]),
        ('{"prompt": "x",', ["line 2", "not valid JSON"]),
        ('["prompt"]', ["line 2", "JSON object"]),
    ],
)
def test_bad_input_line_names_line_and_field_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str, words: list[str]
) -> None:
    src = write_lines(tmp_path / "in.jsonl", [json.dumps(INPUT[0]), bad, json.dumps(INPUT[1])])
    out = tmp_path / "out.jsonl"
    assert main(["predictor", "predict", "--in", str(src), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("slomesh predictor: error:")
    for w in words:
        assert w in err
    assert not out.exists()


def test_missing_files_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o.jsonl"
    assert main(["predictor", "predict", "--in", str(tmp_path / "nope"), "--out", str(out)]) == 2
    assert "--in: no file" in capsys.readouterr().err
    src = write_lines(tmp_path / "in.jsonl", [json.dumps(INPUT[0])])
    args = ["predictor", "predict", "--in", str(src), "--out", str(out), "--model", "x.npz"]
    assert main(args) == 2
    assert "no model file" in capsys.readouterr().err


def tiny_data_dir(root: Path) -> Path:
    """The three llm-responses layouts, a few synthetic rows each."""
    root.mkdir()
    arena = []
    for i, topic in enumerate(TOPICS):
        for model in ("big-chat", "small-chat"):
            arena.append({"model": model, "prompt": long_prompt(topic), "response": "w " * 600})
            arena.append({"model": model, "prompt": short_prompt(topic), "response": "no"})
        arena.append({"model": "big-chat", "prompt": f"empty {i}", "response": ""})
    with gzip.open(root / "arena-hard-auto_pairs.jsonl.gz", "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in arena)
    with gzip.open(root / "gsm8k_example_model_solutions.jsonl.gz", "wt") as f:
        for i in range(12):
            row = {"question": f"What is {i} + {i}?", "ground_truth": "x"}
            for v in ("6b_finetuning", "175b_verification"):
                row[v] = {"solution": "step " * (20 + i), "is_correct": True}
            f.write(json.dumps(row) + "\n")
    fc = root / "fastchat-eval"
    fc.mkdir()
    questions = [json.dumps({"question_id": q, "text": f"Tell me {q}"}) for q in range(6)]
    write_lines(fc / "question.jsonl", questions)
    answers = [json.dumps({"question_id": q, "text": "a b c " * q}) for q in range(1, 6)]
    write_lines(fc / "answer_tiny.jsonl", answers)
    return root


@pytest.mark.slow  # trains and evaluates a model end to end
def test_train_then_eval_on_a_tiny_data_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tiny_data_dir(tmp_path / "data")
    model = tmp_path / "m.npz"
    assert main(["predictor", "train", "--data", str(data), "--out", str(model)]) == 0
    out = capsys.readouterr().out
    for name in ("| learned |", "| per-model-mean |", "| input-length-regression |"):
        assert name in out
    meta = json.loads(model.with_suffix(".json").read_text())
    assert meta["info"]["tokenizer"] == "words-x1.3"
    assert meta["info"]["split"] == {"seed": 0, "test_fraction": 0.2, "by": "prompt"}
    assert {r["predictor"] for r in meta["info"]["heldout_metrics"]} >= {"learned", "global-mean"}
    assert main(["predictor", "eval", "--model", str(model), "--data", str(data)]) == 0
    assert "| learned |" in capsys.readouterr().out


def test_train_refuses_a_non_npz_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["predictor", "train", "--out", str(tmp_path / "m.pkl")]) == 2
    assert "--out must end in .npz" in capsys.readouterr().err
