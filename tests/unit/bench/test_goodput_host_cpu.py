"""How busy the rest of the host was at each rate of bench-goodput's ladder (cpu_rates.py): the
host's busy time from /proc/stat, less the measured system's own CPU."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slomesh.bench.compare.cpu import CpuSplit
from slomesh.bench.goodput.cpu_rates import CpuSampler, cpu_by_rate, host_busy_s
from slomesh.bench.goodput.page import cpu_rate_lines


def test_host_busy_time_counts_every_state_but_idle_and_iowait(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    tick = os.sysconf("SC_CLK_TCK")
    # user nice system idle iowait irq softirq steal guest guest_nice
    stat.write_text(f"cpu  {tick} {tick} {tick} 999999 888888 {tick} {tick} {tick} 0 0\ncpu0 1\n")
    assert host_busy_s(stat) == pytest.approx(6.0)
    stat.write_text("intr 1 2 3\n")
    assert host_busy_s(stat) == 0.0
    assert host_busy_s(tmp_path / "missing") == 0.0


def test_the_other_cores_are_the_host_less_the_system() -> None:
    split = iter([CpuSplit(0.0, 0.0), CpuSplit(2.0, 1.0), CpuSplit(4.0, 2.0)])
    clock = iter([10.0, 12.0, 14.0])
    host = iter([100.0, 103.5, 107.0])  # 3.5 busy seconds per 2 s, the system 3 of them
    sampler = CpuSampler(7, lambda pid: next(split), 0.0, lambda: next(clock), lambda: next(host))
    for _ in range(3):
        sampler.sample()
    rows = cpu_by_rate(sampler.samples, {40.0: (9.0, 15.0)})
    assert rows[0]["host_other_cores"] == pytest.approx(0.25)
    data = {
        "plan": {"output_len": 256},
        "systems": [{"name": "slomesh", "steps": [], "cpu_by_rate": rows}],
    }
    text = "\n".join(cpu_rate_lines(data))
    assert "host's other cores busy" in text
    assert [c.strip() for c in text.splitlines()[-1].split("|")][1:7] == [
        "slomesh",
        "40",
        "1.00",
        "0.50",
        "0.00",
        "0.25",
    ]
