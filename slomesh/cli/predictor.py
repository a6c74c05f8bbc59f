"""`slomesh predictor`: train, evaluate and run the learned output-length predictor.

- `train`: split the llm-responses data by prompt (seeded), train on the train split, print the
  held-out comparison with the baselines and write the model file (+ .json metadata).
- `eval`: the same comparison for a saved model, on the split recorded in its file.
- `predict`: predictions for a JSONL file of prompts. Every input line is checked before anything
  is written; a bad line stops the command (exit 2) naming the line and field, and OUT is not
  created. Output lines keep the input order: the input object plus the prediction fields.
- `replay`: prequential online learning over a JSONL stream with true lengths
  (`slomesh/cli/predictor_replay.py`).
- `loso`: leave-one-source-out evaluation of the offline prior (`slomesh/cli/predictor_loso.py`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shared.domain import SLO, Request
from slomesh.cli.errors import UsageError
from slomesh.cli.predictor_inputs import MODEL_HELP, PredictInput, read_inputs
from slomesh.cli.predictor_loso import add_loso_parser
from slomesh.cli.predictor_replay import add_replay_parser

if TYPE_CHECKING:  # the predictor modules pull in scikit-learn: imported when a command runs
    from services.predictor.core.learned.dataset import LengthExample
    from services.predictor.core.learned.predictor import LearnedPredictor
    from services.predictor.evaluation import Report

DEFAULT_TEST_FRACTION = 0.2
DATA_HELP = "llm-responses directory (default: ../shared/data/llm-responses beside the repo)"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("predictor", help="train, evaluate and run the learned length predictor")
    cmds = p.add_subparsers(dest="predictor_command", required=True)

    tr = cmds.add_parser("train", help="train on the llm-responses data, print held-out metrics")
    tr.add_argument("--data", help=DATA_HELP)
    tr.add_argument("--out", help="model file to write, .npz (default: the shipped default.npz)")
    tr.add_argument("--seed", type=int, default=0, help="split and training seed (default 0)")
    tr.add_argument(
        "--test-fraction",
        type=float,
        default=DEFAULT_TEST_FRACTION,
        help=f"share of prompts held out (default {DEFAULT_TEST_FRACTION})",
    )
    tr.set_defaults(func=run_train)

    ev = cmds.add_parser("eval", help="held-out metrics of a model against the baselines")
    ev.add_argument("--model", help=MODEL_HELP)
    ev.add_argument("--data", help=DATA_HELP)
    ev.set_defaults(func=run_eval)

    pr = cmds.add_parser("predict", help="predict output lengths for a JSONL file of prompts")
    pr.add_argument("--in", dest="in_path", required=True, help="input JSONL (one object a line)")
    pr.add_argument("--out", dest="out_path", required=True, help="output JSONL")
    pr.add_argument("--model", help=MODEL_HELP)
    pr.set_defaults(func=run_predict)

    add_replay_parser(cmds)
    add_loso_parser(cmds)


# --- train / eval ---------------------------------------------------------------------------


def _split(
    data: str | None, seed: int, test_fraction: float
) -> tuple[list[LengthExample], list[LengthExample]]:
    from services.predictor.core.learned.dataset import split_by_prompt
    from services.predictor.data import load_llm_responses

    if not 0.0 < test_fraction < 1.0:
        raise UsageError(f"--test-fraction must be in (0, 1), got {test_fraction}")
    return split_by_prompt(load_llm_responses(data), test_fraction, seed)


def _print_report(report: Report) -> None:
    from services.predictor.core.learned.metrics import markdown_table

    print(markdown_table(report.rows))
    print(
        f"\nlearned, one request at a time: {report.unbatched_ms_per_request:.3f} ms/request "
        f"({report.unbatched_requests} requests)"
    )


def run_train(args: argparse.Namespace) -> int:
    import numpy as np
    import sklearn

    from services.predictor.core.learned.dataset import examples_digest
    from services.predictor.core.learned.training import train_learned
    from services.predictor.data import DEFAULT_DATA_DIR
    from services.predictor.evaluation import compare
    from services.predictor.model_store import DEFAULT_MODEL_PATH, save_model

    out = Path(args.out) if args.out else DEFAULT_MODEL_PATH
    if out.suffix != ".npz":
        raise UsageError(f"--out must end in .npz, got {out}")
    train, test = _split(args.data, args.seed, args.test_fraction)
    print(
        f"train: {len(train)} examples, held out: {len(test)} (split by prompt, seed {args.seed})"
    )
    info = {
        "created_by": f"slomesh predictor train --seed {args.seed}",
        "data": Path(args.data or DEFAULT_DATA_DIR).name,
        "split": {"seed": args.seed, "test_fraction": args.test_fraction, "by": "prompt"},
        "test_data_hash": examples_digest(test),
        "software": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "scikit-learn": sklearn.__version__,
        },
    }
    model = train_learned(train, seed=args.seed, info=info)
    report = compare(model, train, test)
    _print_report(report)
    info_metrics = {"heldout_metrics": [r.to_dict() for r in report.rows]}
    npz, meta = save_model(model, out, info_metrics)
    print(f"\nwrote {npz} ({npz.stat().st_size / 1e6:.2f} MB, version {model.version}) and {meta}")
    return 0


def run_eval(args: argparse.Namespace) -> int:
    from services.predictor.core.learned.dataset import examples_digest
    from services.predictor.evaluation import compare
    from services.predictor.model_store import load_model

    model = load_model(args.model)
    split = model.info.get("split") or {}
    seed = int(split.get("seed", 0))
    fraction = float(split.get("test_fraction", DEFAULT_TEST_FRACTION))
    train, test = _split(args.data, seed, fraction)
    if model.info.get("training_data_hash") not in (None, examples_digest(train)):
        print(
            "warning: the train split differs from the one this model was trained on "
            "(other data?); held-out rows may have been seen in training",
            file=sys.stderr,
        )
    print(
        f"model {model.version}: held out {len(test)} examples "
        f"(split by prompt, seed {seed}, fraction {fraction})"
    )
    _print_report(compare(model, train, test))
    return 0


# --- predict --------------------------------------------------------------------------------


def predict_lines(
    predictor: LearnedPredictor, inputs: list[tuple[dict[str, Any], PredictInput]]
) -> list[dict[str, Any]]:
    """Output objects (input plus prediction fields), in input order."""
    from services.predictor.core.learned.dataset import approx_tokens

    top = predictor.upper[-1]
    requests = [
        Request(
            request_id=f"line-{i}",
            model=p.model,
            input_tokens=p.input_tokens or approx_tokens(p.prompt),
            max_tokens=p.max_tokens or top,
            arrival_s=0.0,
            slo=SLO(ttft_deadline_s=1.0, class_name=p.slo_class),
            tenant=p.tenant,
        )
        for i, (_, p) in enumerate(inputs)
    ]
    dists = predictor.predict_batch(requests, [p.prompt for _, p in inputs])
    return [{**obj, **d.to_dict()} for (obj, _), d in zip(inputs, dists, strict=True)]


def run_predict(args: argparse.Namespace) -> int:
    from services.predictor.model_store import load_model

    in_path, out_path = Path(args.in_path), Path(args.out_path)
    inputs = read_inputs(in_path, PredictInput)
    outputs = predict_lines(load_model(args.model), inputs)
    tmp = out_path.with_name(out_path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for obj in outputs:
            f.write(json.dumps(obj) + "\n")
    os.replace(tmp, out_path)
    print(f"wrote {len(outputs)} predictions to {out_path}")
    return 0
