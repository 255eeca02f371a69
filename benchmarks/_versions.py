"""Timing this checkout's library beside another checkout's, each in a process of its own.

    timed = run_other(other, __file__, ["--asks", "3"])   # this script, the other's `src`
    print(compared("One ask, ms", ours, theirs, other))

The other run is this very script with ``--json`` (it prints its timings as one JSON list on
its last line), the other checkout's ``src`` first on ``PYTHONPATH``: an older checkout is
measured by today's benchmark.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

__all__ = ["compared", "run_other", "spread"]


def run_other(other: Path, script: str, args: list[str]) -> list[float]:
    """The timings `script` prints with ``--json`` and `args`, run on `other`'s library."""
    command = [sys.executable, script, *args, "--json"]
    env = {**os.environ, "PYTHONPATH": str(other.resolve() / "src")}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    timed: list[float] = json.loads(done.stdout.strip().splitlines()[-1])
    return timed


def spread(values: list[float]) -> str:
    """The median and the range: ``12.3 (10.1-15.0)``."""
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def compared(title: str, ours: list[float], theirs: list[float], other: Path | None) -> str:
    """The report: `title`, then each version's median and range, and the ratio."""
    rows = [
        f"{title}, median (min-max) of {len(ours)}\n",
        "| version | ms | ratio to this |",
        "| --- | ---: | ---: |",
        f"| this checkout | {spread(ours)} | 1.00 |",
    ]
    if theirs:
        ratio = statistics.median(theirs) / statistics.median(ours)
        rows.append(f"| {other} | {spread(theirs)} | {ratio:.2f} |")
    return "\n".join(rows)
