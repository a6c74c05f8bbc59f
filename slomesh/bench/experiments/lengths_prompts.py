"""`lengths-prompts`: what the prompt-aware length predictor buys the `slomesh` stack.

Not a paper figure: QLM estimates output lengths with a prompt-less online histogram; here the
ingress's learned predictor (services/predictor, the shipped default model) sees each prompt and
attaches a `LengthHint` that QLM uses instead. Workload: the predictor's HELD-OUT examples only
(the llm-responses data split by prompt with the split seed and fraction recorded in the shipped
model, so no prompt the model trained on), a seeded sample of N of them (without replacement
while N <= the held-out size), Poisson arrivals at each swept rate (the same request order,
classes and unit-rate gaps at every rate, only time-scaled), SLO classes interactive / batch-1 /
batch-2 at 50/30/20% (as in qlm-wa), max_tokens 2048, true output = min(data output, 2048),
input tokens clipped to llama-2-13b's 4096-token context minus max_tokens. The data's answering
models are chat models (gpt-4, claude, ...): their name stays the PREDICTOR's model feature (what
it was trained on), but Request.model is the cluster's served model, llama-2-13b. Cluster:
qlm-wa's (2x A100-80GB serving llama-2-13b). Arms on the same requests: `slomesh` with the
learned predictor's hints (one predict_batch call with the prompts), `slomesh` without hints (QLM's
online histogram), `slomesh-true-lengths` (oracle lengths); with_qlm adds the same three for `qlm`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from services.predictor.core.learned.dataset import (
    LengthExample,
    example_request,
    examples_digest,
    split_by_prompt,
)
from services.predictor.core.learned.metrics import MetricRow, evaluate, from_distributions
from services.predictor.core.learned.predictor import LearnedPredictor
from services.predictor.data import load_llm_responses
from services.predictor.model_store import load_model
from services.scheduler.core.qlm.length_estimates import hint_from_prediction
from shared.domain import LengthHint, Request
from shared.workloads import get_slo_class
from slomesh.bench.experiments.base import Experiment, ExperimentArgs, ExperimentOutput, thin
from slomesh.bench.experiments.helpers import (
    Panel,
    Point,
    attainment_cell,
    detail_table,
    pct,
    pivot,
    point_json,
    progress,
    run_stack,
    save_figure,
    series_by_policy,
)
from slomesh.bench.scenarios import SCENARIOS
from slomesh.stacks import STACKS

SERVED_MODEL = "llama-2-13b"
CONTEXT_TOKENS = 4096
MAX_TOKENS = 2048
CLASS_SHARES = {"interactive": 0.5, "batch-1": 0.3, "batch-2": 0.2}


@dataclass(frozen=True, slots=True)
class Arm:
    name: str
    stack: str
    hints: bool


def arms(with_qlm: bool = False) -> list[Arm]:
    out = []
    for base in ("slomesh", "qlm") if with_qlm else ("slomesh",):
        out += [
            Arm(f"{base}+hints", base, True),
            Arm(f"{base} (histogram)", base, False),
            Arm(f"{base}-true-lengths", f"{base}-true-lengths", False),
        ]
    return out


def heldout_split(
    model: LearnedPredictor, data_dir: Path | None = None
) -> tuple[list[LengthExample], list[LengthExample], dict[str, Any]]:
    """(train, held out, split info) with the split the model was trained with."""
    split = model.info.get("split") or {}
    seed, fraction = int(split.get("seed", 0)), float(split.get("test_fraction", 0.2))
    train, test = split_by_prompt(load_llm_responses(data_dir), fraction, seed)
    info = {
        "seed": seed,
        "test_fraction": fraction,
        "train_examples": len(train),
        "heldout_examples": len(test),
        "train_matches_model": model.info.get("training_data_hash") == examples_digest(train),
        "heldout_matches_model": model.info.get("test_data_hash") == examples_digest(test),
    }
    return train, test, info


@dataclass(frozen=True, slots=True)
class Workload:
    """The sampled examples, their requests at unit rate (no hints) and the learned hints."""

    examples: list[LengthExample]
    requests: list[Request]
    gaps: np.ndarray[Any, np.dtype[np.float64]]
    hints: list[LengthHint | None]
    metrics: list[MetricRow]

    def at_rate(self, rate_rps: float, hints: bool) -> list[Request]:
        times = np.cumsum(self.gaps / rate_rps).tolist()
        return [
            replace(r, arrival_s=t, length_hint=h if hints else None)
            for r, t, h in zip(self.requests, times, self.hints, strict=True)
        ]


def build_workload(
    heldout: Sequence[LengthExample], n: int, seed: int, model: LearnedPredictor
) -> Workload:
    """n seeded held-out examples as served requests, with the predictor's hints and metrics."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x1E9]))
    idx = rng.choice(len(heldout), size=n, replace=n > len(heldout))
    examples = [heldout[int(i)] for i in idx]
    names = list(CLASS_SHARES)
    classes = rng.choice(len(names), size=n, p=list(CLASS_SHARES.values()))
    gaps = rng.exponential(1.0, size=n)
    max_input = CONTEXT_TOKENS - MAX_TOKENS
    requests = [
        Request(
            request_id=f"r{i:06d}",
            model=SERVED_MODEL,
            input_tokens=min(ex.input_tokens, max_input),
            max_tokens=MAX_TOKENS,
            arrival_s=0.0,
            slo=get_slo_class(names[int(c)]).to_slo(),
            tenant=ex.tenant,
            true_output_tokens=min(ex.output_tokens, MAX_TOKENS),
        )
        for i, (ex, c) in enumerate(zip(examples, classes, strict=True))
    ]
    # what the ingress asks: the data's model name (the predictor's feature), the prompt
    asked = [
        replace(example_request(ex, i, MAX_TOKENS), input_tokens=r.input_tokens)
        for i, (ex, r) in enumerate(zip(examples, requests, strict=True))
    ]
    dists = model.predict_batch(asked, [ex.prompt for ex in examples])
    hints = [
        hint_from_prediction(
            d.mean_tokens, d.bucket_upper_tokens, d.bucket_probs, MAX_TOKENS, d.version
        )
        for d in dists
    ]
    truth = [r.output_tokens_to_generate for r in requests]
    upper = list(model.upper)
    blind = model.predict_batch(asked, None)
    metrics = [
        evaluate("learned (prompt)", truth, from_distributions(dists, upper), upper),
        evaluate("learned (no prompt)", truth, from_distributions(blind, upper), upper),
    ]
    return Workload(examples, requests, gaps, hints, metrics)


class LengthsPrompts(Experiment):
    """slomesh with learned prompt-aware hints vs its histogram vs true lengths, over rates."""

    name: ClassVar[str] = "lengths-prompts"
    figure: ClassVar[str] = "Fig. 9 setup; beyond the paper"
    description: ClassVar[str] = (
        "held-out llm-responses prompts on qlm-wa's cluster: slomesh with the learned predictor's "
        "hints vs QLM's prompt-less histogram vs true lengths, over Poisson rates"
    )
    default_requests: ClassVar[int] = 2000
    rates_rps: ClassVar[tuple[float, ...]] = (25.0, 50.0, 100.0, 200.0)
    """The cluster sustains ~11 req/s; above that a run is a burst of N requests whose backlog
    QLM + SCORPIO drain (rejecting what cannot make its TTFT deadline)."""
    with_qlm: ClassVar[bool] = True

    def execute(self, args: ExperimentArgs, out_dir: Path) -> ExperimentOutput:
        n = self.requests(args)
        rates = thin(self.rates_rps, args.max_points)
        model = load_model()
        _, heldout, split = heldout_split(model)
        wl = build_workload(heldout, n, args.seed, model)
        cluster = SCENARIOS.create("qlm-wa").cluster
        arm_list = arms(self.with_qlm)
        points: list[Point] = []
        with progress(args.progress, n * len(rates) * len(arm_list), self.name) as tick:
            for rate in rates:
                for arm in arm_list:
                    reqs = wl.at_rate(rate, arm.hints)
                    run = run_stack(cluster, STACKS.create(arm.stack), reqs, tick)
                    summary = replace(run.summary, stack=arm.name)
                    hinted = sum(r.length_hint is not None for r in reqs)
                    extra = {"stack": arm.stack, "hinted_requests": hinted}
                    points.append(Point(rate, arm.name, summary, extra))
        x_label = "rate r/s"
        tables = [("SLO attainment % by rate", pivot(points, x_label, attainment_cell))]
        tables += [
            (f"{rate:g} req/s", detail_table([p for p in points if p.x == rate], x_label))
            for rate in rates
        ]
        tables.append(("Predictor on these requests", _metric_table(wl.metrics)))
        true_mean = float(np.mean([r.true_output_tokens or 0 for r in wl.requests]))
        return ExperimentOutput(
            results={
                "served_model": SERVED_MODEL,
                "max_tokens": MAX_TOKENS,
                "class_shares": CLASS_SHARES,
                "rates_rps": rates,
                "split": split,
                "predictor": model.version,
                "predictor_metrics": [m.to_dict() for m in wl.metrics],
                "arms": [{"arm": a.name, "stack": a.stack, "hints": a.hints} for a in arm_list],
                "points": [point_json(p) for p in points],
            },
            tables=tables,
            figures=[self._figure(points, out_dir)],
            notes=[
                f"{n} held-out requests (of {split['heldout_examples']}; split seed "
                f"{split['seed']}, fraction {split['test_fraction']}, matches the model's: "
                f"{split['heldout_matches_model']}), mean true output {true_mean:.0f} tokens",
                f"served on qlm-wa's cluster ({cluster.num_instances}x A100-80GB, {SERVED_MODEL}); "
                "classes " + ", ".join(f"{k} {v:.0%}" for k, v in CLASS_SHARES.items()),
                f"predictor {model.version}; hints only in the +hints arms",
            ],
        )

    def _figure(self, points: list[Point], out_dir: Path) -> Path:
        xs, att = series_by_policy(points, pct)
        _, good = series_by_policy(points, lambda s: s.goodput_rps)
        return save_figure(
            out_dir / f"{self.name}.png",
            [
                Panel("line", "SLO attainment", "req/s", "SLO met %", xs, att, (0.0, 105.0)),
                Panel("line", "Goodput", "req/s", "requests / s", xs, good),
            ],
            f"{self.name}: learned prompt-aware hints vs histogram vs true lengths",
        )


def _metric_table(rows: Sequence[MetricRow]) -> str:
    from shared.report.table import markdown_table

    body = [
        [
            m.predictor,
            str(m.n),
            f"{m.mae_tokens:.1f}",
            "n/a" if m.kendall_tau is None else f"{m.kendall_tau:.3f}",
            f"{m.p90_coverage:.2f}",
        ]
        for m in rows
    ]
    return markdown_table(["predictor", "n", "MAE tokens", "Kendall tau", "p90 coverage"], body)
