"""Instruction features, model-name parts, version-1 model files and leave-one-source-out."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from learned_fixtures import SMALL, request, synthetic_examples
from test_predictor_cli import tiny_data_dir

from services.predictor.core.learned import codec
from services.predictor.core.learned.dataset import LengthExample
from services.predictor.core.learned.features import (
    FeatureConfig,
    _model_parts_v1,
    _model_parts_v2,
)
from services.predictor.core.learned.instruction import (
    INSTRUCTION_FEATURE_NAMES,
    instruction_features,
    requested_tokens,
)
from services.predictor.core.learned.predictor import LearnedPredictor
from services.predictor.core.learned.training import train_learned
from services.predictor.loso import leave_one_source_out, split_source
from slomesh.cli.main import main


def _on(prompt: str) -> set[str]:
    return {
        n for n, v in zip(INSTRUCTION_FEATURE_NAMES, instruction_features(prompt), strict=True) if v
    }


@pytest.mark.parametrize(
    ("prompt", "present", "absent"),
    [
        (
            "Rewrite this sentence:\nthe cat sat",
            {"task_rewrite", "rewrite_input_log"},
            {"task_code"},
        ),
        ("Classify the sentiment: I love it", {"task_classify"}, {"long_form"}),
        ("Summarize the article below.\n" + "word " * 300, {"task_summarise"}, set()),
        ("Translate into French: good morning", {"task_translate", "rewrite_input_log"}, set()),
        ("List 10 ideas for a party", {"task_list", "has_requested_size"}, {"short_form"}),
        ("Write a detailed essay on rivers", {"task_write", "long_form"}, {"short_form"}),
        ("Implement quicksort in Python", {"task_code"}, {"task_translate"}),
        ("Answer in one word: capital of Peru?", {"short_form"}, {"long_form"}),
        ("Is the sky green?", {"yes_no"}, {"task_code"}),
        ("Answer yes or no: do fish swim", {"yes_no"}, set()),
        ("Write a haiku about snow", {"poem", "task_write"}, set()),
        ("", set(), {"first_line_log"}),
    ],
)
def test_instruction_features_name_the_task(
    prompt: str, present: set[str], absent: set[str]
) -> None:
    on = _on(prompt)
    assert present <= on
    assert not absent & on


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("write 500 words on tea", 650.0),
        ("in three sentences", 66.0),
        ("two paragraphs, please", 220.0),
        ("list 10 names", 300.0),
        ("give me 5 ideas", 150.0),
        ("explain gravity", None),
    ],
)
def test_requested_size(text: str, tokens: float | None) -> None:
    assert requested_tokens(text) == (None if tokens is None else pytest.approx(tokens))


def test_rewrite_input_length_grows_with_the_input() -> None:
    i = INSTRUCTION_FEATURE_NAMES.index("rewrite_input_log")
    short = instruction_features("Paraphrase:\n" + "word " * 10)[i]
    long = instruction_features("Paraphrase:\n" + "word " * 400)[i]
    assert 0 < short < long


@pytest.mark.parametrize(
    ("a", "b", "shared"),
    [("gpt35", "gpt-3.5-turbo", {"gpt", "35"}), ("llama2-13b", "Llama-2-70b-chat", {"llama", "2"})],
)
def test_model_name_parts_v2_share_families(a: str, b: str, shared: set[str]) -> None:
    assert shared <= set(_model_parts_v2(a)) & set(_model_parts_v2(b))
    assert not shared <= set(_model_parts_v1(a)) & set(_model_parts_v1(b))


def test_version_1_model_file_loads_and_predicts_as_before() -> None:
    cfg = SMALL.model_copy(update={"features": FeatureConfig(text_hash_bits=10, feature_version=1)})
    old = train_learned(synthetic_examples(), cfg, seed=0)
    arrays, meta = codec.decode(old.to_bytes())
    del meta["features"]["feature_version"]  # a file written before the field existed
    meta.pop("format", None)
    v1 = codec.encode(arrays, {**meta, "format_version": 1})
    loaded = LearnedPredictor.from_bytes(v1)
    assert loaded.features.feature_version == 1
    prompt = "Write a long essay about cats, with many sections"
    r = request(prompt=prompt)
    assert loaded.predict(r, prompt).mean_tokens == pytest.approx(
        old.predict(r, prompt).mean_tokens
    )
    wider = FeatureConfig(text_hash_bits=10).n_features
    assert wider > loaded.features.n_features


def _two_sources() -> list[LengthExample]:
    a = [
        LengthExample(e.prompt, e.model, e.input_tokens, e.output_tokens, "a")
        for e in synthetic_examples(0)
    ]
    b = [
        LengthExample(e.prompt, "m3", e.input_tokens, e.output_tokens, "b")
        for e in synthetic_examples(1, ["owls", "maps", "kites", "lamps", "drums", "moss"])
    ]
    return a + b


def test_split_source_refuses_unknown_and_lone_sources() -> None:
    ex = _two_sources()
    train, test = split_source(ex, "b")
    assert {e.tenant for e in train} == {"a"} and {e.tenant for e in test} == {"b"}
    with pytest.raises(ValueError, match="no examples of source 'c'"):
        split_source(ex, "c")
    with pytest.raises(ValueError, match="the only one"):
        split_source([e for e in ex if e.tenant == "a"], "a")


def test_loso_holds_out_each_source_and_names_its_unseen_models() -> None:
    saved: list[str] = []
    results = leave_one_source_out(_two_sources(), SMALL, on_model=lambda s, _: saved.append(s))
    assert [r.source for r in results] == saved == ["a", "b"]
    by = {r.source: r for r in results}
    assert by["b"].unseen_models == ["m3"] and by["a"].unseen_models == ["m1", "m2"]
    # essays vs yes/no: the wording carries over to the held-out source's unseen prompts
    assert by["b"].learned.kendall_tau is not None and by["b"].learned.kendall_tau > 0.5
    assert by["b"].learned.n == by["b"].test_examples


@pytest.mark.slow  # trains a full-size model end to end
def test_loso_cli_writes_json_and_models(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tiny_data_dir(tmp_path / "data")
    out = tmp_path / "loso"
    args = ["predictor", "loso", "--data", str(data), "--source", "gsm8k", "--out", str(out)]
    assert main([*args, "--stream-lines", "5"]) == 0
    printed = capsys.readouterr().out
    assert "| gsm8k |" in printed and "| arena-hard |" not in printed
    body = json.loads((out / "loso.json").read_text())
    assert [s["source"] for s in body["sources"]] == ["gsm8k"]
    assert body["sources"][0]["unseen_models"] == ["gpt3-175b_verification", "gpt3-6b_finetuning"]
    stream = [json.loads(line) for line in (out / "stream-gsm8k.jsonl").read_text().splitlines()]
    assert len(stream) == 5 and {s["tenant"] for s in stream} == {"gsm8k"}
    model = LearnedPredictor.from_bytes((out / "loso-gsm8k.npz").read_bytes())
    assert model.info["loso_held_out_source"] == "gsm8k"
    assert np.isfinite(model.centres).all()


def test_loso_cli_refuses_an_unknown_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tiny_data_dir(tmp_path / "data")
    assert main(["predictor", "loso", "--data", str(data), "--source", "nope"]) == 2
    assert "--source 'nope' is not a source" in capsys.readouterr().err
