"""The generated goodput page (docs/results/goodput.md) and its plot, from bench-goodput's JSON.

`slomesh bench-goodput ... --page docs/results/goodput.md` stores the run's JSON next to the page
(goodput.json) and renders the page and goodput.png from it; `--render docs/results/goodput.json`
renders them again without measuring. Nothing in the page is typed by hand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from shared.report.table import fmt_num, markdown_table
from slomesh.bench.goodput.analysis import across_lines, confusion_table, sim_table
from slomesh.bench.goodput.cpu_rates import engine_us_per_token
from slomesh.bench.goodput.rejections import rejections_table
from slomesh.bench.goodput.results import Step, format_table, step_of_json

BASELINE = "bare-vllm"
MEETS = 0.95
"""A rate the baseline serves within the SLO: >= this share of offered requests met it."""


def steps_of(data: Mapping[str, Any]) -> list[Step]:
    return [step_of_json(s) for system in data["systems"] for s in system["steps"]]


def target_lines(steps: Sequence[Step], baseline: str = BASELINE) -> list[str]:
    """The goodput targets per system against the baseline, each stated with its figures:
    at every rate where the baseline meets the SLO for >= 95% of offered requests, goodput >=
    0.95x the baseline's; at twice the highest such rate (the lowest ladder rate at or above
    it), goodput >= 0.8x
    the baseline's best goodput and >= 90% of served requests within the SLO."""
    base = {s.rate_rps: s for s in steps if s.system == baseline}
    if not base:
        return [f"No {baseline} figures: no targets to check."]
    easy = [r for r, s in base.items() if s.offered and s.met / s.offered >= MEETS]
    best = max(s.goodput_rps for s in base.values())
    lines = []
    for name in dict.fromkeys(s.system for s in steps if s.system != baseline):
        mine = {s.rate_rps: s for s in steps if s.system == name}
        for rate in sorted(r for r in easy if r in mine):
            got, ref = mine[rate].goodput_rps, base[rate].goodput_rps
            ok = got >= 0.95 * ref
            lines.append(
                f"{name} at {rate:g} req/s (bare meets the SLO): goodput {got:.1f} vs "
                f"{ref:.1f}, {got / ref if ref else 0:.2f}x (target >= 0.95x): "
                f"{'met' if ok else 'NOT met'}"
            )
        twice = 2 * max(easy) if easy else None
        above = sorted(r for r in mine if twice is not None and r >= twice)
        if above:
            over, s = above[0], mine[above[0]]
            share = s.met_of_served or 0.0
            ok = s.goodput_rps >= 0.8 * best and share >= 0.9
            lines.append(
                f"{name} at {over:g} req/s (>= 2x {max(easy):g}): goodput {s.goodput_rps:.1f} vs "
                f"bare's best {best:.1f}, {s.goodput_rps / best if best else 0:.2f}x (target "
                f">= 0.8x); {share:.0%} of served met the SLO (target >= 90%): "
                f"{'met' if ok else 'NOT met'}"
            )
        elif twice is not None:
            lines.append(
                f"{name}: no rate >= {twice:g} req/s (2x the rate bare serves) on the ladder"
            )
    return lines


def analysis_lines(data: Mapping[str, Any]) -> list[str]:
    """The confusion matrices and the simulator-vs-live tables of the run's slomesh systems."""
    found = data.get("analysis") or {}
    if not found:
        return []
    out = [
        "## Admission: confusion matrix",
        "",
        "Per offered request: admitted (served or failed after admission) and met or missed the "
        "objectives, or rejected (429); a rejected request *would have met* when its timing, "
        "replayed on simulated engines with the live mesh's calibrated profile next to the "
        "requests that were served, gets its first token and its tokens within the objectives "
        "(`slomesh/bench/goodput/confusion.py`).",
        "",
    ]
    out += [confusion_table(name, a) for name, a in found.items()]
    out += rejection_lines(data)
    out += [
        "",
        "## Simulator vs live",
        "",
        "The same requests (arrival times, lengths) through the simulator: simulated engines with "
        "the profile calibrated on the live run (its decode step fitted on every rate's served "
        "requests against the batch they streamed in, its submit overhead on the lowest rate; "
        "`slomesh/bench/goodput/delivered_fit.py`), the ingress's admission "
        "(`services/ingress/core/delivered.py`) in the loop (`slomesh/bench/goodput/sim.py`), "
        "on a host whose speed varies as the live one's did: every step's time is scaled by a "
        "factor drawn in blocks from the live ladder's measured speed (each stream's TPOT over "
        "the fitted step at its batch; `slomesh/bench/goodput/speed_fit.py`, "
        "`slomesh/sim/host_speed.py`), several seeded hosts per rate, their median shown. "
        "Target: within 10% of the live goodput at every rate.",
        "",
    ]
    for name, a in found.items():
        live = {s.rate_rps: s.goodput_rps for s in steps_of(data) if s.system == name}
        out += [sim_table(name, a, live), "", f"Profile: {a['calibration']}.", ""]
    return out + across_lines(data)


def rejection_lines(data: Mapping[str, Any]) -> list[str]:
    """Which admission rule refused, per rate, from the sampled traces (rejections.py)."""
    found = {
        n: a["rejections"]
        for n, a in (data.get("analysis") or {}).items()
        if (a.get("rejections") or {}).get("rows")
    }
    if not found:
        return []
    ratio = next(iter(found.values())).get("sample_ratio")
    out = [
        "",
        "## Admission: which rule rejected",
        "",
        "The reason of every rejection among the mesh's sampled traces (head-sampled, "
        f"{ratio if ratio is not None else '?'} of the requests), put to the rate whose "
        "arrivals hold it and labelled as the ingress's metrics label it "
        "(`ray_slomesh_rejected_total{reason}`; `slomesh/bench/goodput/rejections.py`): "
        "*predicted_infeasible* is a prediction of the TTFT or TPOT beyond the objective (the "
        "ingress's guard on what the mesh delivers, `services/ingress/core/delivered.py`, or "
        "the scheduler's), *queue_deadline* and *queue_drain* the scheduler's queue.",
        "",
    ]
    steps = steps_of(data)
    for name, rej in found.items():
        rejected = {s.rate_rps: s.rejected for s in steps if s.system == name}
        out.append(rejections_table(name, rej, rejected))
    return out


def gap_lines(data: Mapping[str, Any], baseline: str = BASELINE) -> list[str]:
    """Where the goodput went that a slomesh system lacks for a goodput target
    (`target_lines`): at a rate where the baseline meets the SLO, against the baseline's
    goodput there; at twice the highest such rate or more, against the baseline's best. The
    share the admission turned away though it would have met (the confusion matrix), and the
    rest, which the mesh's engines could not serve within the SLO at the speed they ran."""
    steps = steps_of(data)
    base = {s.rate_rps: s for s in steps if s.system == baseline}
    easy = [r for r, s in base.items() if s.offered and s.met / s.offered >= MEETS]
    if not easy:
        return []
    best = max(base.values(), key=lambda s: s.goodput_rps)
    lines = []
    for name, a in (data.get("analysis") or {}).items():
        rows = {r["rate_rps"]: r for r in a.get("rows", [])}
        for s in sorted((s for s in steps if s.system == name), key=lambda s: s.rate_rps):
            row = rows.get(s.rate_rps)
            if s.rate_rps in easy:
                ref, share, what = base[s.rate_rps], 0.95, "bare vLLM's goodput"
            elif s.rate_rps >= 2 * max(easy):
                ref, share, what = best, 0.8, "bare vLLM's best goodput"
            else:
                continue
            if row is None or not s.duration_s or s.goodput_rps >= share * ref.goodput_rps:
                continue
            lost = ref.goodput_rps - s.goodput_rps
            false = row["rejected_would_meet"] / s.duration_s
            lines.append(
                f"{name} at {s.rate_rps:g} req/s: {lost:.1f} req/s short of {what}; of it, "
                f"{false:.1f} req/s the admission turned away though they would have met; the "
                f"other {max(0.0, lost - false):.1f} req/s the mesh's engines could not serve "
                f"within the SLO at the speed they ran (TPOT p50 {s.tpot_p50_ms:.2f} ms against "
                f"bare's {ref.tpot_p50_ms:.2f} ms at {ref.rate_rps:g} req/s, same max_num_seqs: "
                "each token of a full batch takes that much longer, so a seat frees that much "
                "later)"
            )
            mine = _engine_cores(data, name, s.rate_rps)
            theirs = _engine_cores(data, baseline, ref.rate_rps)
            if mine is not None and theirs is not None:
                lines[-1] += (
                    f"; its engine processes kept {mine:.2f} cores busy, bare's {theirs:.2f}"
                )
    return lines


def _engine_cores(data: Mapping[str, Any], system: str, rate: float) -> float | None:
    for entry in data["systems"]:
        if entry["name"] == system:
            for row in entry.get("cpu_by_rate") or []:
                if row["rate_rps"] == rate:
                    return float(row["engine_cores"])
    return None


def cpu_rate_lines(data: Mapping[str, Any]) -> list[str]:
    """The CPU table per rate (cpu_rates.py): how much of a core the engine processes got and
    what they spent per token served, and what the system's other processes took."""
    steps = {(s.system, s.rate_rps): s for s in steps_of(data)}
    output_len = int(data["plan"]["output_len"])
    rows = []
    for entry in data["systems"]:
        for r in entry.get("cpu_by_rate") or []:
            step = steps.get((entry["name"], r["rate_rps"]))
            per_token = (
                engine_us_per_token(r["engine_cores"], step.served, output_len, step.duration_s)
                if step is not None
                else None
            )
            rows.append(
                [
                    entry["name"],
                    f"{r['rate_rps']:g}",
                    f"{r['engine_cores']:.2f}",
                    f"{r['outside_cores']:.2f}",
                    fmt_num(r.get("engine_wait_cores"), 2),
                    fmt_num(r.get("host_other_cores"), 2),
                    fmt_num(per_token, 0),
                ]
            )
    if not rows:
        return []
    headers = (
        "system",
        "rate req/s",
        "engine cores busy",
        "other cores busy",
        "engine waiting for a core",
        "host's other cores busy",
        "engine CPU us per token served",
    )
    return [
        "",
        "CPU at each rate, sampled every second over the rate's run (first request sent to last "
        "answer; `slomesh/bench/goodput/cpu_rates.py`): the cores vLLM's engine processes kept "
        "busy (one engine core is one thread: at most 1 per engine), those the system's other "
        "processes kept busy (slomesh: the control plane, Ray, the replicas' vLLM front ends; "
        "bare vLLM: its API server), the share of the time the engine's main thread (the one that "
        "steps the model) was ready to run but waited for a core (the kernel's run-queue "
        "delay), the cores the rest of the host kept busy (the load generator, other sessions; "
        "the host's busy time less the system's), "
        "and the engine's CPU per output token served. With the seats full, fewer engine cores "
        "means the engine waited for a core; more CPU per token means it ran slower on the "
        "core it had.",
        "",
        markdown_table(headers, sorted(rows, key=lambda r: (float(r[1]), r[0]))),
    ]


def before_lines(data: Mapping[str, Any]) -> list[str]:
    """The earlier sitting's table (`--before`), with its command and load."""
    old = data.get("before")
    if not old:
        return []
    return [
        "## Before",
        "",
        f"An earlier sitting, {old.get('date', '?')} at commit `{old.get('commit', '?')}`, load "
        f"average before {old.get('load_average_before', '?')}, after "
        f"{old.get('load_average_after', '?')}:",
        "",
        "```",
        str(old.get("command", "")),
        "```",
        "",
        format_table(steps_of(old), BASELINE),
        "",
    ]


def plot(data: Mapping[str, Any], path: Path) -> None:
    """Goodput and TTFT p50 against offered load, one line per system (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plan = data["plan"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for system in data["systems"]:
        steps = sorted((step_of_json(s) for s in system["steps"]), key=lambda s: s.rate_rps)
        if not steps:
            continue
        rates = [s.rate_rps for s in steps]
        ax1.plot(rates, [s.goodput_rps for s in steps], marker="o", label=system["name"])
        ax2.plot(rates, [max(s.ttft_p50_ms, 0.1) for s in steps], marker="o", label=system["name"])
    top = max((r for r in plan["rates"]), default=1.0)
    ax1.plot([0, top], [0, top], color="grey", linestyle=":", label="offered")
    ax1.set_xlabel("offered load, req/s")
    ax1.set_ylabel(
        f"goodput, req/s (TTFT <= {plan['slo_ttft_ms']:g} ms, TPOT <= {plan['slo_tpot_ms']:g} ms)"
    )
    ax1.legend()
    ax1.grid(alpha=0.3)
    ax2.axhline(plan["slo_ttft_ms"], color="grey", linestyle=":", label="TTFT objective")
    ax2.set_yscale("log")
    ax2.set_xlabel("offered load, req/s")
    ax2.set_ylabel("TTFT p50, ms")
    ax2.legend()
    ax2.grid(alpha=0.3)
    fig.suptitle("vLLM's serving benchmark: bare vLLM and slomesh, same engines")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render(data: Mapping[str, Any]) -> str:
    """The page's markdown."""
    plan = data["plan"]
    headers = "sent" if plan["slo_headers"] else "not sent (slomesh's default class)"
    out = [
        "# Goodput with vLLM's own benchmark",
        "",
        "<!-- generated by slomesh bench-goodput --page from goodput.json: do not edit -->",
        "",
        "Goodput is the rate of requests answered within their SLO. Every figure here is vLLM's "
        "serving benchmark (`vllm.benchmarks.serve`, the harness `vllm bench serve` runs) "
        "against each system in one sitting, same tiny model and engine arguments: random "
        f"dataset, {plan['input_len']} input and {plan['output_len']} output tokens, "
        f"`--ignore-eos`, `--goodput ttft:{plan['slo_ttft_ms']:g} tpot:{plan['slo_tpot_ms']:g}`, "
        f"Poisson arrivals for {plan['seconds']:g} s per rate. The same objectives as the "
        f"headers `x-slo-ttft-ms` / `x-slo-tpot-ms`: {headers}. *rejected* counts 429 answers; "
        "*x bare* is goodput over bare vLLM's at the same rate; *bursts* counts served answers "
        "whose tokens after the first all arrived within 0.5 ms per token of it: held back "
        "somewhere between the engine and the benchmark's client (the client's own event loop "
        "on a loaded machine included) and read at once, not as generated. The benchmark's "
        f"client runs at nice {plan.get('client_nice', 0)} for every system (a client waiting "
        "for a core would stamp its own wait into every TTFT).",
        "",
        "Command:",
        "",
        "```",
        data["command"],
        "```",
        "",
        f"Run {data['date']} at commit `{data.get('commit', '?')}` (slomesh runs the code of "
        f"the benchmark's import path), {data['cpus']} CPUs, "
        f"load average before {data['load_average_before']}, after {data['load_average_after']}.",
        "",
    ]
    for system in data["systems"]:
        if system.get("why_not"):
            out += [f"- **{system['name']}**: {system['why_not']}", ""]
    steps = steps_of(data)
    out += [format_table(steps, BASELINE), "", "![goodput](goodput.png)", "", "## Targets", ""]
    out += [f"- {line}" for line in target_lines(steps)] or ["No system besides bare vLLM."]
    gaps = gap_lines(data)
    if gaps:
        out += ["", "Where the goodput short of the target went:", ""]
        out += [f"- {line}" for line in gaps]
    startup = [f"{s['name']} {s['startup_s']:.0f} s" for s in data["systems"] if s.get("startup_s")]
    if startup:
        out += ["", f"Start-up (launch to the first answered request): {', '.join(startup)}."]
    cpu = [
        f"{s['name']} {s['cpu_engine_s']:.0f} s in vLLM's engine cores, "
        f"{s['cpu_outside_s']:.0f} s outside them"
        for s in data["systems"]
        if s.get("cpu_engine_s") is not None
    ]
    if cpu:
        out += ["", f"CPU over the whole ladder: {'; '.join(cpu)}."]
    out += cpu_rate_lines(data)
    out += ["", *analysis_lines(data), *before_lines(data)]
    return "\n".join(out) + "\n"


def write_page(data: Mapping[str, Any], page: Path) -> list[Path]:
    """The page, its data file (same name, .json) and the plot (goodput.png next to it)."""
    import json

    page.parent.mkdir(parents=True, exist_ok=True)
    data_file = page.with_suffix(".json")
    data_file.write_text(json.dumps(data, indent=2) + "\n")
    png = page.parent / "goodput.png"
    plot(data, png)
    page.write_text(render(data))
    return [page, data_file, png]
