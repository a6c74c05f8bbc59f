"""A fake /proc for the engine priority and CPU placement tests: a process tree written as the
files those rules read (stat, cmdline, task/<tid>)."""

from __future__ import annotations

from pathlib import Path

ProcTree = dict[int, tuple[int, str, str, tuple[int, ...]]]
"""pid -> (parent pid, comm name, command line, thread ids)."""


def fake_proc(root: Path, tree: ProcTree) -> Path:
    """`tree` written under `root`, which is returned; `root/self` is there too (not a pid)."""
    for pid, (ppid, name, cmdline, threads) in tree.items():
        d = root / str(pid)
        (d / "task").mkdir(parents=True)
        (d / "stat").write_text(f"{pid} ({name}) S {ppid} {pid} {pid} 0 -1 4194560 0 0\n")
        (d / "cmdline").write_bytes(cmdline.replace(" ", "\0").encode() + b"\0")
        for tid in threads:
            (d / "task" / str(tid)).mkdir()
    (root / "self").mkdir()
    return root
