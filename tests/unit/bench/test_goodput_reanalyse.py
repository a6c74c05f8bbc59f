"""`slomesh bench-goodput --render J --reanalyse`: the confusion matrix and the simulated ladder
computed again from a sitting's result files, without measuring anything."""

from __future__ import annotations

import json
import random
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from slomesh.bench.goodput.harness import result_name
from slomesh.bench.goodput.results import REJECTED_REASON
from slomesh.cli.main import main


def write_result(out: Path, tpot_s: float, rate: float = 5.0) -> None:
    """A result of slomesh-1 at `rate` (5 by default) in `out`: 18 served at `tpot_s` per token,
    2 rejected."""
    rng = random.Random(1)
    starts = sorted(rng.uniform(0, 5) for _ in range(20))
    result = {
        "start_times": starts,
        "input_lens": [32] * 20,
        "output_lens": [64] * 18 + [0, 0],
        "ttfts": [0.05] * 18 + [0.0, 0.0],
        "latencies": [0.05 + 63 * tpot_s] * 18 + [0.0, 0.0],
        "errors": [""] * 18 + [REJECTED_REASON] * 2,
        "date": "20260101-120030",
        "duration": 5.0,
    }
    folder = out / "vllm-results" / "slomesh-1"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / result_name(rate)).write_text(json.dumps(result))


def test_reanalyse_recomputes_the_analysis_from_the_result_files(tmp_path: Path) -> None:
    write_result(tmp_path, 0.004)
    step = {
        "system": "slomesh-1",
        "rate_rps": 5.0,
        "goodput_rps": 3.6,
        "offered": 20,
        "served": 18,
        "rejected": 2,
        "errors": 0,
        "met": 18,
        "duration_s": 5.0,
        "ttft_p50_ms": 50.0,
        "ttft_p99_ms": 50.0,
        "tpot_p50_ms": 4.0,
        "tpot_p99_ms": 4.0,
    }
    data: dict[str, Any] = {
        "command": "slomesh bench-goodput",
        "date": "d",
        "cpus": 2,
        "load_average_before": "1",
        "load_average_after": "2",
        "plan": {
            "rates": [5.0],
            "seconds": 4.0,
            "input_len": 32,
            "output_len": 64,
            "slo_ttft_ms": 1000.0,
            "slo_tpot_ms": 50.0,
            "slo_headers": True,
            "warmups": 0,
            "seed": 0,
            "client_nice": 0,
        },
        "systems": [
            {"name": "slomesh-1", "engines": 1, "base_url": "http://x/v1", "steps": [step]},
            {"name": "bare-vllm", "engines": 1, "base_url": "http://y/v1", "steps": []},
        ],
        "analysis": {},
    }
    path = tmp_path / "goodput.json"
    path.write_text(json.dumps(data))
    end = time.mktime(time.strptime("20260101-120030", "%Y%m%d-%H%M%S"))
    rejected = {
        "name": "admission",
        "start_time": datetime.fromtimestamp(end - 2, UTC).isoformat(),
        "status": {"status_code": "ERROR", "description": "APIError: predicted TTFT 2 s at 3 ..."},
        "resource": {"attributes": {"service.name": "slomesh-ingress"}},
    }
    (tmp_path / "traces-slomesh-1.jsonl").write_text(json.dumps(rejected) + "\n")
    assert main(["bench-goodput", "--render", str(path), "--page", str(tmp_path / "g.md")]) == 0
    assert "## Admission: confusion matrix" not in (tmp_path / "g.md").read_text()
    argv = ["bench-goodput", "--render", str(path), "--reanalyse", "--page", str(tmp_path / "g.md")]
    assert main(argv) == 0
    rows = json.loads(path.read_text())["analysis"]["slomesh-1"]["rows"]
    assert [r["rate_rps"] for r in rows] == [5.0] and rows[0]["admitted_met"] == 18
    assert "bare-vllm" not in json.loads(path.read_text())["analysis"]
    assert "## Admission: confusion matrix" in (tmp_path / "g.md").read_text()
    rejections = json.loads(path.read_text())["analysis"]["slomesh-1"]["rejections"]["rows"]
    assert rejections[0]["kinds"] == {"predicted_infeasible": 1}
    assert "## Admission: which rule rejected" in (tmp_path / "g.md").read_text()

    # the same ladder simulated with a calibration from a sitting whose engine missed the TPOT
    earlier = tmp_path / "earlier"
    write_result(earlier, 0.060)
    (earlier / "goodput.json").write_text(json.dumps({**data, "date": "the earlier one"}))
    argv = ["bench-goodput", "--render", str(path), "--sim-calibrated-on", str(earlier)]
    assert main([*argv, "--page", str(tmp_path / "g.md")]) == 2  # one rate: refused
    write_result(earlier, 0.060, rate=2.0)  # a ladder: 2 and 5 r/s
    ladder = {**data, "date": "the earlier one", "plan": {**data["plan"], "rates": [2.0, 5.0]}}
    (earlier / "goodput.json").write_text(json.dumps(ladder))
    assert main([*argv, "--page", str(tmp_path / "g.md")]) == 0
    across = json.loads(path.read_text())["across"]
    assert across["sitting"]["date"] == "the earlier one"
    slow = across["analysis"]["slomesh-1"]["rows"][0]
    own = json.loads(path.read_text())["analysis"]["slomesh-1"]["rows"][0]
    assert own["sim_met"] >= 18 and slow["sim_met"] == 0  # its calibration carries 60 ms/token
    page = (tmp_path / "g.md").read_text()
    assert "### Across sittings" in page and "the earlier one" in page
