"""What bench-goodput adds to vLLM's figures for each slomesh system: the admission's confusion
matrix per rate (confusion.py) and the same ladder in the simulator with the live mesh's
calibrated profile (sim.py), side by side with the live goodput.

Both read vLLM's detailed result files of the run (`<out>/vllm-results/<system>/rate-R.json`);
the profile is calibrated on the system's ladder (sim.py's `calibrate`), and each rate is simulated
on `HostSpeedFit.seeds` hosts drawn from the ladder's measured host speed (speed_fit.py); the
simulated goodput is their median, the rest of the row that median host's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from services.ingress.core.delivered import DeliveredGuardConfig
from shared.domain import HardwareProfile
from shared.report.table import fmt_num, markdown_table
from slomesh.bench.goodput.confusion import Offered, confusion, offered_requests
from slomesh.bench.goodput.delivered_fit import fit_decode_line
from slomesh.bench.goodput.harness import result_name
from slomesh.bench.goodput.sim import SimStep, at_rate, calibrate, simulate_rate
from slomesh.bench.goodput.sitting import scaled_line
from slomesh.bench.goodput.speed_fit import HostSpeedFit, describe, hosts, ladder_series

SIM_TOLERANCE = 0.10
"""The simulator's goodput is within this fraction of the live one (the target)."""


def read_offered(plan: Mapping[str, Any], result_dir: Path) -> dict[float, list[Offered]]:
    """The offered requests of each rate of `plan` whose result file is in `result_dir`."""
    return {
        r: offered_requests(
            json.loads((result_dir / result_name(r)).read_text()), plan["output_len"]
        )
        for r in plan["rates"]
        if (result_dir / result_name(r)).exists()
    }


def analyse_system(
    engines: int,
    plan: Mapping[str, Any],
    result_dir: Path,
    profile: HardwareProfile,
    max_num_seqs: int,
    ingress_replicas: int,
    speed_fit: HostSpeedFit | None = None,
    calibrate_on: Mapping[float, Sequence[Offered]] | None = None,
    host_scale: float | None = None,
) -> dict[str, Any] | None:
    """Confusion matrix and simulated goodput per rate; None without result files. The
    profile is calibrated on this ladder, or on `calibrate_on` (another sitting's ladder,
    `read_offered`): the simulator's prediction of this sitting from that one's calibration,
    its decode step times `host_scale` (how much slower this sitting's host is, sitting.py)."""
    offered = read_offered(plan, result_dir)
    rates = list(offered)
    source = dict(calibrate_on) if calibrate_on else offered
    if not rates or not source:
        return None
    ttft_s, tpot_s = plan["slo_ttft_ms"] / 1e3, plan["slo_tpot_ms"] / 1e3
    line = fit_decode_line(source, engines)
    fit = speed_fit or HostSpeedFit()
    series = ladder_series(source, line, engines, fit.bin_s) if line is not None else []
    if line is not None and host_scale is not None:
        line = scaled_line(line, host_scale)  # after the series: it is relative to the line
    low = min(source)
    calibrated = calibrate(profile, source[low], engines, max_num_seqs, line, low)
    rows = []
    for rate in rates:
        reqs = offered[rate]
        if not reqs:
            continue
        here = at_rate(calibrated, line, rate)
        c = confusion(reqs, here, engines, max_num_seqs, ttft_s, tpot_s)
        horizon_s = max(r.arrival_s + r.ttft_s + r.tpot_s * r.output_tokens for r in reqs) + 10.0
        sims = sorted(
            (
                simulate_rate(
                    rate,
                    reqs,
                    here,
                    engines,
                    max_num_seqs,
                    ttft_s,
                    tpot_s,
                    DeliveredGuardConfig(),
                    ingress_replicas,
                    host,
                )
                for host in (hosts(series, horizon_s, fit) if series else [None])
            ),
            key=lambda x: x.goodput_rps,
        )
        sim: SimStep = sims[(len(sims) - 1) // 2]
        rows.append(
            {
                "rate_rps": rate,
                "offered": c.offered,
                "admitted_met": c.admitted_met,
                "admitted_missed": c.admitted_missed,
                "rejected_would_meet": c.rejected_would_meet,
                "rejected_would_miss": c.rejected_would_miss,
                "false_rejection_share": round(c.false_rejection_share, 4),
                "sim_served": sim.served,
                "sim_rejected": sim.rejected,
                "sim_met": sim.met,
                "sim_goodput_rps": round(sim.goodput_rps, 3),
                "sim_goodput_min_rps": round(sims[0].goodput_rps, 3),
                "sim_goodput_max_rps": round(sims[-1].goodput_rps, 3),
            }
        )
    how = describe(series, fit) if series else "host speed: constant"
    return {"calibration": f"{calibrated.source}; {how}", "rows": rows}


def confusion_table(name: str, analysis: Mapping[str, Any]) -> str:
    headers = (
        "system",
        "rate req/s",
        "offered",
        "admitted, met",
        "admitted, missed",
        "rejected, would have met",
        "rejected, would have missed",
        "false rejections % of offered",
    )
    rows = [
        [
            name,
            f"{r['rate_rps']:g}",
            str(r["offered"]),
            str(r["admitted_met"]),
            str(r["admitted_missed"]),
            str(r["rejected_would_meet"]),
            str(r["rejected_would_miss"]),
            fmt_num(r["false_rejection_share"], 1, 100.0),
        ]
        for r in analysis["rows"]
    ]
    return markdown_table(headers, rows)


def sim_table(name: str, analysis: Mapping[str, Any], live: Mapping[float, float]) -> str:
    """Simulated vs live goodput per rate; `live` maps rate -> live goodput. With simulated
    hosts: the seeds' range, and the served and admitted-but-missed requests live and simulated
    (the median host's)."""
    headers = (
        "system",
        "rate req/s",
        "live goodput",
        "sim goodput",
        "sim seeds min-max",
        "served live / sim",
        "admitted, missed live / sim",
        "sim / live",
        "within 10%",
    )
    rows = []
    for r in analysis["rows"]:
        got = live.get(r["rate_rps"])
        ratio = r["sim_goodput_rps"] / got if got else None
        ok = ratio is not None and abs(ratio - 1.0) <= SIM_TOLERANCE
        rows.append(
            [
                name,
                f"{r['rate_rps']:g}",
                fmt_num(got, 1),
                fmt_num(r["sim_goodput_rps"], 1),
                _range(r),
                f"{r['admitted_met'] + r['admitted_missed']} / {r['sim_served']}",
                f"{r['admitted_missed']} / {r['sim_served'] - r['sim_met']}",
                fmt_num(ratio, 2),
                "yes" if ok else "no",
            ]
        )
    return markdown_table(headers, rows)


def _range(row: Mapping[str, Any]) -> str:
    lo, hi = row.get("sim_goodput_min_rps"), row.get("sim_goodput_max_rps")
    return "-" if lo is None or hi is None else f"{lo:.1f}-{hi:.1f}"


def across_lines(data: Mapping[str, Any]) -> list[str]:
    """The simulator against live across sittings (`--sim-calibrated-on`): this sitting's
    ladder simulated with the profile calibrated on an earlier sitting's ladder."""
    across = data.get("across") or {}
    found, sitting = across.get("analysis") or {}, across.get("sitting") or {}
    if not found:
        return []
    out = [
        "",
        "### Across sittings",
        "",
        "The same simulation, with the profile (decode step, prefill, submit overhead, host "
        f"speed) calibrated on another sitting instead: {sitting.get('date', '?')} at commit "
        f"`{sitting.get('commit', '?')}`, load average before "
        f"{sitting.get('load_average_before', '?')}, after "
        f"{sitting.get('load_average_after', '?')}: `{sitting.get('command', '')}`. It is what "
        "the simulator predicts for a sitting it was not calibrated on; the host's other load "
        "differs between sittings and the calibration carries the earlier one's.",
        "",
    ]
    for name, a in found.items():
        live = {
            float(s["rate_rps"]): float(s["goodput_rps"])
            for entry in data["systems"]
            if entry["name"] == name
            for s in entry["steps"]
        }
        out += [sim_table(name, a, live), "", f"Profile: {a['calibration']}.", ""]
    return out
