"""The generated agreement page (docs/results/agreement.md): live against simulated attainment.

`slomesh bench-agree ... --page docs/results/agreement.md` stores each stack's figures of the run
in the page's data file (the same path with .json) and renders the whole page from that file
again. Live runs are short and one at a time, so the stacks of one trace may come from several
invocations: an entry is kept while the trace it was measured on (requests, rate, seed, classes,
seats, token budget, profile) is the stored one, and a run on another trace starts the data
afresh. Each stack keeps its command and the host's load average around its live run (the host
is shared; load slows the live replicas, not the simulator). Nothing in the page is typed by hand.

Targets (checked, not asserted): each stack's live attainment within `MAX_DIFF_POINTS` of the
simulated one, and the same ranking on both sides (pairs within `tie_points` count as tied).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from shared.report.table import markdown_table
from slomesh.bench.agree.compare import ranking, rankings_agree
from slomesh.bench.agree.outcomes import KINDS

MAX_DIFF_POINTS = 5.0
"""Largest |live - sim| attainment difference per stack that counts as agreement, points."""
TRACE_KEYS = (
    "requests",
    "rate",
    "seed",
    "classes",
    "replicas",
    "max_num_seqs",
    "max_num_batched_tokens",
    "profile",
)
"""The bench-agree arguments that fix the trace and the replicas both sides run."""


def trace_key(args: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments (of a report's `args`) that make two runs comparable (the profile by its
    file name, so runs from another checkout compare)."""
    key = {k: args[k] for k in TRACE_KEYS}
    key["profile"] = Path(str(key["profile"])).name
    return key


def entries(report: Mapping[str, Any], command: str) -> dict[str, dict[str, Any]]:
    """stack -> its figures in a bench-agree report (the `all` rows, and each class's under
    `classes`; live ones when run)."""
    env = report.get("environment", {})
    out: dict[str, dict[str, Any]] = {}
    classes: dict[str, dict[str, Any]] = {}
    for row in report["rows"]:
        if row["class_name"] != "all":
            classes.setdefault(row["stack"], {})[row["class_name"]] = {
                "sim_pct": row["sim_pct"],
                "live_pct": row.get("live_pct"),
                "requests": row["requests"],
            }
            continue
        stack = row["stack"]
        live = row.get("live_pct")
        out[stack] = {
            "sim_pct": row["sim_pct"],
            "live_pct": live,
            "requests": row["requests"],
            "command": command,
            "profile": report.get("profiles", {}).get(stack, report.get("profile", "-")),
            "classes": classes.setdefault(stack, {}),
        }
        seeds = report.get("sim_seeds_pct", {}).get(stack)
        if seeds:
            out[stack]["sim_seeds_pct"] = seeds
        on_credit = report.get("sim_on_credit", {}).get(stack)
        if on_credit is not None:  # the simulated ingress ran the lease fast path
            out[stack]["sim_on_credit"] = on_credit
        ends = report.get("outcomes", {}).get(stack)
        if ends:
            out[stack]["outcomes"] = ends
        swaps = report.get("swaps", {}).get(stack)
        if swaps is not None:  # a --scenario run: its swaps (scenario.swap_report)
            out[stack]["swaps"] = {k: v for k, v in swaps.items() if k != "by_replica"}
        if stack in env:
            e = env[stack]
            out[stack] |= {
                "loadavg_before": e["loadavg_before"][0],
                "loadavg_after": e["loadavg_after"][0],
                "run_s": e["run_s"],
            }
    return out


def update_data(data: Mapping[str, Any], report: Mapping[str, Any], command: str) -> dict[str, Any]:
    """The stored data with `report`'s stacks merged in (module docstring: same trace only)."""
    key = trace_key(report["args"])
    stacks = dict(data.get("stacks", {})) if data.get("trace") == key else {}
    for stack, entry in entries(report, command).items():
        if entry["live_pct"] is None and stacks.get(stack, {}).get("live_pct") is not None:
            continue  # a simulator-only run keeps the live figure measured before
        stacks[stack] = entry
    return {"trace": key, "tie_points": report["args"]["tie_points"], "stacks": stacks}


def _fmt(x: float | None, sign: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x:+.1f}" if sign else f"{x:.1f}"


def _band(e: Mapping[str, Any]) -> str:
    """The simulated attainment's range over the timing seeds ("-": one seed)."""
    seeds = e.get("sim_seeds_pct") or []
    if len(seeds) < 2:
        return "-"
    return f"{min(seeds):.1f}-{max(seeds):.1f} ({len(seeds)})"


def _outcomes(stacks: Mapping[str, Mapping[str, Any]], order: list[str]) -> str:
    """The table of how each (stack, class) ended on both sides ("": none stored)."""
    rows = []
    for s in order:
        ends = stacks[s].get("outcomes")
        if not ends:
            continue
        live, sim = ends["live"], ends["sim"]
        for c in sorted(set(live) | set(sim)):
            a, b = live.get(c, {}), sim.get(c, {})
            if set(a) <= {"met"} and set(b) <= {"met"}:
                continue
            rows.append([s, c, *(f"{a.get(k, 0)} / {b.get(k, 0)}" for k in KINDS)])
    return markdown_table(["stack", "class", *KINDS], rows, left=(0, 1)) if rows else ""


def _diff(x: Mapping[str, Any]) -> float | None:
    return None if x.get("live_pct") is None else x["live_pct"] - x["sim_pct"]


def _fast_path(stacks: Mapping[str, Mapping[str, Any]]) -> str:
    """What the page says of the ingress's lease fast path: simulated for every stack (their
    runs stored how many requests it placed), or not."""
    if stacks and all("sim_on_credit" in e for e in stacks.values()):
        return (
            "The ingress's lease fast path is simulated with the live credit ledger and lease "
            "book (slomesh/sim/leases.py): while an ingress replica holds credits the scheduler "
            "granted (only while nothing waits in its global queue and a replica has a free "
            "seat, for stacks whose placer agrees), it places a request itself on the replica "
            "with the most credit left, and the scheduler's books hear of it when the outbox's "
            "Sync call brings the notice; each stack's profile line says how many requests it "
            "placed."
        )
    return (
        "Not simulated: the ingress's lease fast path (services/ingress/fast_path.py), which "
        "places a request on the replica with the most credit left, not by the stack's placer, "
        "while nothing waits in the global queue and a replica has a free seat."
    )


def render(data: Mapping[str, Any]) -> str:
    stacks: Mapping[str, Mapping[str, Any]] = data["stacks"]
    tie = float(data["tie_points"])
    trace = data["trace"]
    sim = {s: e["sim_pct"] for s, e in stacks.items()}
    live = {s: e["live_pct"] for s, e in stacks.items() if e["live_pct"] is not None}
    sim_rank = {s: i + 1 for i, s in enumerate(ranking(sim))}
    live_rank = {s: i + 1 for i, s in enumerate(ranking(live))}
    rows = []
    for s in ranking(sim):
        e = stacks[s]
        diff = None if e["live_pct"] is None else e["live_pct"] - e["sim_pct"]
        load = "-"
        if "loadavg_before" in e:
            load = f"{e['loadavg_before']:.1f} / {e['loadavg_after']:.1f}"
        rows.append(
            [
                s,
                _fmt(e["live_pct"]),
                _fmt(e["sim_pct"]),
                _band(e),
                _fmt(diff, sign=True),
                "yes" if diff is not None and abs(diff) <= MAX_DIFF_POINTS else "no",
                str(live_rank.get(s, "-")),
                str(sim_rank[s]),
                load,
            ]
        )
    table = markdown_table(
        [
            "stack",
            "live att. %",
            "sim att. %",
            "sim over seeds",
            "live - sim (points)",
            f"within {MAX_DIFF_POINTS:g}",
            "live rank",
            "sim rank",
            "load avg before / after",
        ],
        rows,
        left=(0, 5),
    )
    class_rows = [
        [s, c, _fmt(x["live_pct"]), _fmt(x["sim_pct"]), _fmt(_diff(x), sign=True)]
        for s in ranking(sim)
        for c, x in sorted(stacks[s].get("classes", {}).items())
    ]
    per_class = markdown_table(
        ["stack", "class", "live att. %", "sim att. %", "live - sim (points)"],
        class_rows,
        left=(0, 1),
    )
    ends = _outcomes(stacks, ranking(sim))
    if ends:
        per_class += (
            "\n\nHow each class's requests ended, live / sim (met, served late, or turned away "
            "by the rule named: slomesh/bench/agree/outcomes.py); classes that met every SLO on "
            "both sides are left out:\n\n" + ends
        )
    both = {s: live[s] for s in live}
    agree = rankings_agree(both, {s: sim[s] for s in both}, tie) if len(both) > 1 else None
    missing = sorted(set(sim) - set(live))
    scenario = str(trace["classes"]).removeprefix("scenario ")
    if scenario != trace["classes"]:
        return _render_scenario(data, scenario, table, per_class, live, sim, agree)
    lines = [
        "# Live mesh against the simulator (bench-agree)",
        "",
        "Generated by `slomesh bench-agree --page docs/results/agreement.md` from "
        "`agreement.json` beside this page; do not edit by hand. One seeded open-loop trace, "
        "replayed on the live mesh (vLLM CPU replicas of the tiny model, each stack on a fresh "
        "mesh started as `slomesh up --stack` starts it, with the ingress's delivered-latency "
        "guard and reject hold-off, the limits the simulator does not run lifted: "
        "slomesh/cli/bench_agree_live.py) and on the simulator (the same scheduler and ingress "
        "admission, slomesh/sim/ingress.py; the replicas' measured CPU profile, its decode step "
        "the plane of time per token over batch and offered rate fitted on calibration traces of "
        "their own seeds, one per calibration rate (on the one at the trace's rate alone, when it "
        "ran), served by each stack's own mesh before its trace: "
        "slomesh/bench/agree/calibrate.py; unless the command sets --host-speed-window 0, that "
        "plane is then fitted again on the stack's measured trace itself and the simulated "
        "replicas replay the host's speed over the trace, window by window, measured on its "
        "streams: slomesh/bench/agree/host_speed.py; the simulated guard's samples span the "
        "calibrated "
        "submit overhead, the hops after the ingress, and it counts the ingress loop's delay the "
        "live guard's calibration rejections named; a batch is served whole, as the live ingress "
        "serves it; a stack planning on length hints gets the live predictor's, "
        "slomesh/bench/agree/hints.py); attainment is the share of requests that met their "
        "SLO (rejections count as misses). The host is shared: its 1-minute load average around "
        "each live run is listed; the simulated replicas are slowed only by the host speed "
        "measured on the trace. "
        "The simulated policy reads what the live one reads, the scheduler's books "
        "(services/scheduler/core/live_view.py): a request counts as in flight from its "
        "placement until its completion report arrives, each simulated finish reported after a "
        "delay drawn from the ones the live scheduler's report log measured on the stack's "
        "trace, and the TTFT guard's engine queues are the Status answers taken every "
        "reconcile interval (slomesh/sim/live_view.py, slomesh/bench/agree/report_delay.py). "
        "Its books plan with the profile the live scheduler was given (--profile, the sweep it "
        "never recalibrates), not the calibrated one the simulated engines run: the TTFT "
        "guard's predictions and the placers' estimates are the live ones. "
        "Arrivals reach the ingress replicas as Serve's proxy routes them (power of two "
        "choices on requests in flight, ties at random). "
        "Those draws are seeded: 'sim att.' is the median seed's run and 'sim over seeds' the "
        "range over the seeds (min-max, seeds), the simulator's own spread under the same "
        "measured timing; a gap inside it is inside the simulator's noise. " + _fast_path(stacks),
        "",
        f"Trace: {trace['requests']} requests at {trace['rate']:g}/s (Poisson), seed "
        f"{trace['seed']}, classes `{trace['classes']}` (name:weight:TTFT s:output tokens:"
        f"prompt tokens); {trace['replicas']} replicas with {trace['max_num_seqs']} seats and "
        f"max_num_batched_tokens {trace['max_num_batched_tokens']}.",
        "",
        *_rankings(table, live, sim, agree, per_class, f"ties within {tie:g} points, "),
    ]
    if missing:
        lines += ["", f"Not run live yet: {', '.join(missing)}."]
    lines += ["", "Simulator profile of each stack:", ""]
    lines += [f"- {s}: `{e.get('profile', '-')}`" for s, e in sorted(stacks.items())]
    lines += ["", "Commands:", ""]
    for cmd in sorted({e["command"] for e in stacks.values()}):
        lines.append(f"    {cmd}")
    return "\n".join(lines) + "\n"


def _render_scenario(
    data: Mapping[str, Any],
    scenario: str,
    table: str,
    per_class: str,
    live: Mapping[str, float],
    sim: Mapping[str, float],
    agree: bool | None,
) -> str:
    """The page of a `bench-agree --scenario` run: the tables, then each stack's swaps."""
    stacks: Mapping[str, Mapping[str, Any]] = data["stacks"]
    trace = data["trace"]
    swaps = [
        [
            s,
            str(w["live_swaps"]) if s in live else "-",
            _fmt(w["live_swap_median_s"]),
            _fmt(w["profile_swap_median_s"]),
            "-" if w["profile_over_live"] is None else f"{w['profile_over_live']:.2f}",
            *(
                str(w.get(k, "-")) if s in live else "-"
                for k in ("failed_requests", "error_requests", "lost_requests")
            ),
            str(w["sim_swaps"]),
        ]
        for s in ranking(sim)
        if (w := stacks[s].get("swaps")) is not None
    ]
    lines = [
        f"# {scenario}: live mesh against the simulator (bench-agree --scenario)",
        "",
        f"Generated by `slomesh bench-agree --scenario {scenario} --page` from the `.json` beside "
        "this page; do not edit by hand. The scenario's workload as one seeded trace "
        "(slomesh/bench/agree/scenario.py), replayed on its shipped live mesh (each stack on a "
        "fresh mesh started as `slomesh up --stack` starts it, each request naming its model) "
        "and on the scenario's simulated cluster (the same measured profiles, the same scheduler "
        "and ingress admission). Attainment is the share of requests that met their SLO "
        "(rejections count as misses). The host is shared: its 1-minute load average around "
        "each live run is listed.",
        "",
        f"Trace: {trace['requests']} requests at {trace['rate']:g}/s, seed {trace['seed']}; "
        f"{trace['replicas']} replicas with {trace['max_num_seqs']} seats.",
        "",
        *_rankings(table, live, sim, agree, per_class),
        "",
        "Swaps: live, each replica's measured swaps (unload, load, warm-up; ReplicaDeployment."
        "SwapLog); the profile's swap time (`slomesh profile --swap-models`, what the planner "
        "and the simulator charge) and its ratio to the live median; requests a failed swap "
        "answered with an error; requests answered with a server error (HTTP 500: failed after a "
        "replica took them; '-': not counted by that run); requests lost after they were "
        "accepted (a 200 answer whose stream ended short of its forced output length); the "
        "simulator's swap count.",
        "",
        markdown_table(
            [
                "stack",
                "live swaps",
                "live median s",
                "profile s",
                "profile / live",
                "failed",
                "errors",
                "lost",
                "sim swaps",
            ],
            swaps,
            left=(0,),
        ),
        "",
        "Commands:",
        "",
        *sorted({f"    {e['command']}" for e in stacks.values()}),
    ]
    return "\n".join(lines) + "\n"


def _rankings(
    table: str,
    live: Mapping[str, float],
    sim: Mapping[str, float],
    agree: bool | None,
    per_class: str,
    ties: str = "",
) -> list[str]:
    """The table, both rankings, whether they agree, and the per-class table (page lines)."""
    verdict = "-" if agree is None else ("yes" if agree else "no")
    return [
        table,
        "",
        f"Live ranking: {' > '.join(ranking(live)) or '-'}",
        "",
        f"Sim ranking: {' > '.join(ranking(sim))}",
        "",
        f"Rankings agree ({ties}stacks run live): {verdict}",
        "",
        "Per SLO class:",
        "",
        per_class,
    ]


def update_page(page: Path, report: Mapping[str, Any], command: str) -> None:
    """Merge `report` into the page's data file and render the page again."""
    store = page.with_suffix(".json")
    data = json.loads(store.read_text()) if store.exists() else {}
    data = update_data(data, report, command)
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    page.write_text(render(data))
