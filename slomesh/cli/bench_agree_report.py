"""`slomesh bench-agree`'s report: live against simulated attainment per stack and class, both
rankings and the QLM waiting-time estimator's scores, printed and returned as the data written
to agree.json (and merged into the page, slomesh/bench/agree/page.py)."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path
from typing import Any

from services.scheduler.core.qlm.rwt_error import ScoredWait
from shared.metrics.records import RequestRecord
from slomesh.bench.agree.compare import (
    ALL,
    attainment,
    max_spread,
    ranking,
    rankings_agree,
    rwt_score,
    side_by_side,
)
from slomesh.bench.agree.workload import AgreeWorkloadSpec


def _num(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def report(
    args: argparse.Namespace,
    spec: AgreeWorkloadSpec,
    sim: dict[str, list[RequestRecord]],
    sim_scored: dict[str, list[ScoredWait]],
    live: dict[str, list[RequestRecord]],
    live_scored: dict[str, list[ScoredWait]],
    env: dict[str, Any],
    replicas: int,
) -> dict[str, Any]:
    print(
        f"# bench-agree: {spec.requests} requests at {spec.rate_rps:g}/s, seed {args.seed}, "
        f"classes {args.classes}; {replicas} replicas x {args.max_num_seqs} seats, "
        f"max_num_batched_tokens {args.max_num_batched_tokens}, profile {args.profile}"
    )
    both = live if live else {p: [] for p in sim}
    rows = side_by_side(live, sim) if live else []
    result: dict[str, Any] = {
        "args": {
            k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "func"
        },
        "replicas": replicas,
        "environment": env,
        "rows": [],
    }
    print("| stack | class | requests | live att. % | sim att. % | live - sim (points) |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    if rows:
        for r in rows:
            print(
                f"| {r.stack} | {r.class_name} | {r.requests} | {r.live_pct:.1f} | "
                f"{r.sim_pct:.1f} | {r.diff_points:+.1f} |"
            )
            result["rows"].append({**asdict(r), "diff_points": r.diff_points})
    else:
        for p in both:
            for cls, (n, pct) in sorted(attainment(sim[p]).items(), key=lambda kv: kv[0] != ALL):
                print(f"| {p} | {cls} | {n} | - | {pct:.1f} | - |")
                result["rows"].append(
                    {"stack": p, "class_name": cls, "requests": n, "sim_pct": pct}
                )
    sim_all = {p: next(x for x in result["rows"] if x["stack"] == p)["sim_pct"] for p in sim}
    result["sim_ranking"] = ranking(sim_all)
    result["sim_spread_points"] = max_spread(sim_all)
    print(f"sim ranking: {' > '.join(ranking(sim_all))} (spread {max_spread(sim_all):.1f} points)")
    if rows:
        live_all = {r.stack: r.live_pct for r in rows if r.class_name == ALL}
        worst = max(abs(r.diff_points) for r in rows if r.class_name == ALL)
        agree = rankings_agree(live_all, sim_all, args.tie_points)
        result |= {
            "live_ranking": ranking(live_all),
            "live_spread_points": max_spread(live_all),
            "ranking_agrees": agree,
            "max_abs_diff_points": worst,
        }
        print(
            f"live ranking: {' > '.join(ranking(live_all))} (spread "
            f"{max_spread(live_all):.1f}); ranking agrees (ties within {args.tie_points:g} "
            f"points): {agree}; largest |live - sim| per stack: {worst:.1f} points"
        )
    print(f"RWT estimator, requests queued behind >= {args.min_groups} groups:")
    print("| side | stack | pairs | R² point | coverage quantile | coverage widened | MAE s |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    result["rwt"] = []
    for side, scored in (("live", live_scored), ("sim", sim_scored)):
        for p, waits in scored.items():
            if not waits:
                continue
            s = rwt_score(waits, args.min_groups)
            every = rwt_score(waits, 0)
            result["rwt"].append(
                {"side": side, "stack": p, "min_groups": args.min_groups, **asdict(s)}
                | {"all_pairs": every.pairs, "all_r2_point": every.r2_point}
            )
            print(
                f"| {side} | {p} | {s.pairs} | {_num(s.r2_point)} | {_num(s.coverage_quantile)} "
                f"| {_num(s.coverage_widened)} | {_num(s.mean_abs_error_s, 2)} |"
            )
    return result
