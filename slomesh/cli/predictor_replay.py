"""`slomesh predictor replay`: online learning over a stream, measured prequentially.

Reads IN (JSONL, one request a line, in order: the `predict` fields plus the true
`output_tokens`). For each line it first predicts, then learns the true length, through the very
steps the live service's Predict / Observe run (`services/predictor/online.py`). OUT gets the
input objects plus the prediction fields (as `predict` writes them); it prints Kendall tau and MAE
over the first and the second half of the stream and draws tau over a sliding window
(OUT with `.curve.png` for its suffix). Bad input: like `predict`, every line is checked first and
a bad one stops the command (exit 2) naming the line, the field and the rule; nothing is written.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from shared.domain import SLO, Request
from slomesh.cli.errors import UsageError
from slomesh.cli.predictor_inputs import MODEL_HELP, PredictInput, read_inputs

if TYPE_CHECKING:
    from services.predictor.online import StreamMetrics
    from shared.domain.length_distribution import LengthDistribution
    from shared.domain.length_prediction import LengthPredictor

PREDICTOR_CHOICES = ("learned", "online-histogram")
DEFAULT_WINDOW = 200
UNCAPPED_MAX_TOKENS = 1 << 20
"""max_tokens of a line without one: above every bucket bound, so nothing is capped."""


class ReplayInput(PredictInput):
    """One input line of `slomesh predictor replay` (other fields are passed through)."""

    output_tokens: int = Field(ge=1)
    """The request's true output length in tokens (learned after its prediction)."""


def add_replay_parser(cmds: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `replay` under `slomesh predictor`."""
    rp = cmds.add_parser(
        "replay", help="predict-then-learn over a JSONL stream with true lengths (prequential)"
    )
    rp.add_argument("--in", dest="in_path", required=True, help="input JSONL stream, in order")
    rp.add_argument("--out", dest="out_path", required=True, help="output JSONL (predictions)")
    rp.add_argument(
        "--predictor", choices=PREDICTOR_CHOICES, default="learned", help="default: learned"
    )
    rp.add_argument("--model", help=MODEL_HELP + "; learned only")
    rp.add_argument(
        "--model-name",
        default="default",
        help='model name of lines without a "model" field (default: "default")',
    )
    rp.add_argument(
        "--online-layer",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="learned only: the online recalibration layer (default on; --no-online-layer: "
        "the prior's own online steps alone)",
    )
    rp.add_argument(
        "--conformal",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="learned only: the online per-model p90 calibration (default on; --no-conformal: "
        "the distribution's own spread)",
    )
    rp.add_argument(
        "--window",
        type=int,
        default=DEFAULT_WINDOW,
        help=f"lines in the learning curve's sliding window (default {DEFAULT_WINDOW})",
    )
    rp.set_defaults(func=run_replay)


def _core(args: argparse.Namespace) -> LengthPredictor:
    if args.predictor == "learned":
        from services.predictor.core.learned.conformal import ConformalConfig
        from services.predictor.core.learned.online_layer import OnlineLayerConfig
        from services.predictor.core.learned.predictor import LearnedConfig
        from services.predictor.model_store import load_model

        layer = OnlineLayerConfig(enabled=args.online_layer)
        conformal = ConformalConfig(enabled=args.conformal)
        return load_model(args.model, LearnedConfig(online_layer=layer, conformal=conformal))
    if args.model is not None:
        raise UsageError("--model is only for --predictor learned")
    from services.predictor.core.registry import create_predictor

    return create_predictor(args.predictor)


def line_request(index: int, obj: dict[str, Any], line: ReplayInput, model_name: str) -> Request:
    """The Request line `index` (0-based) stands for (id "line-<index+1>")."""
    from services.predictor.core.learned.dataset import approx_tokens

    return Request(
        request_id=f"line-{index + 1}",
        model=line.model if "model" in obj else model_name,
        input_tokens=line.input_tokens or approx_tokens(line.prompt),
        max_tokens=line.max_tokens or UNCAPPED_MAX_TOKENS,
        arrival_s=0.0,
        slo=SLO(ttft_deadline_s=1.0, class_name=line.slo_class),
        tenant=line.tenant,
    )


def replay_lines(
    core: LengthPredictor,
    inputs: Sequence[tuple[dict[str, Any], ReplayInput]],
    model_name: str = "default",
) -> list[LengthDistribution]:
    """Predict-then-observe every line in order; the predictions (each made before its line's
    length was learned)."""
    from services.predictor.online import predict_then_observe

    return [
        predict_then_observe(
            core, line_request(i, obj, line, model_name), line.prompt, line.output_tokens
        )
        for i, (obj, line) in enumerate(inputs)
    ]


def _fmt(m: StreamMetrics, name: str, p90: Sequence[float], true: Sequence[int]) -> str:
    tau = "n/a" if m.kendall_tau is None else f"{m.kendall_tau:.3f}"
    lines = range(m.first_line - 1, m.last_line)
    covered = sum(true[i] <= p90[i] for i in lines) / m.n
    return (
        f"{name} lines {m.first_line}-{m.last_line} (n={m.n}): "
        f"Kendall tau {tau}, MAE {m.mae_tokens:.1f} tokens, p90 covers {100 * covered:.1f}%"
    )


def _draw_curve(
    path: Path, curve: Sequence[tuple[int, float | None]], window: int, title: str
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    xs = [e for e, t in curve if t is not None]
    ys = [t for _, t in curve if t is not None]
    ax.plot(xs, ys, lw=1.5)
    ax.axhline(0.5, color="grey", ls="--", lw=0.8)
    ax.set_xlabel("line (end of window)")
    ax.set_ylabel(f"Kendall tau, last {window} lines")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)


def curve_path(out_path: Path) -> Path:
    """Where the learning curve of OUT goes: OUT with `.curve.png` for its suffix."""
    return out_path.with_suffix(".curve.png")


def run_replay(args: argparse.Namespace) -> int:
    from services.predictor.online import halves, sliding_tau

    in_path, out_path = Path(args.in_path), Path(args.out_path)
    if args.window < 2:
        raise UsageError(f"--window must be >= 2, got {args.window}")
    inputs = read_inputs(in_path, ReplayInput)
    if len(inputs) < 2:
        raise UsageError(f"{in_path}: needs at least 2 lines to measure, got {len(inputs)}")
    core = _core(args)
    dists = replay_lines(core, inputs, args.model_name)
    tmp = out_path.with_name(out_path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for (obj, _), d in zip(inputs, dists, strict=True):
            f.write(json.dumps({**obj, **d.to_dict()}) + "\n")
    os.replace(tmp, out_path)
    means = [d.mean_tokens for d in dists]
    true = [line.output_tokens for _, line in inputs]
    first, second = halves(means, true)
    name = args.predictor
    print(f"replayed {len(inputs)} lines with {name} ({core.observations} observations)")
    p90 = [d.p90_tokens for d in dists]
    print(_fmt(first, "first half: ", p90, true))
    print(_fmt(second, "second half:", p90, true))
    curve = sliding_tau(means, true, args.window)
    png = curve_path(out_path)
    if curve:
        _draw_curve(png, curve, args.window, f"{name}: prequential tau, {in_path.name}")
        print(f"wrote {out_path} and the learning curve {png}")
    else:
        print(f"wrote {out_path} (no learning curve: fewer lines than --window {args.window})")
    return 0
