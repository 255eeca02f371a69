"""Timing this checkout's library beside another checkout's, each in a process of its own.

    add_version_options(parser)                          # --repeat, --other, --json
    return versions(args, lambda: measure(...), __file__, ["--asks", "3"], "One ask, ms")

Each run is this very script with ``--json`` (it prints its timings as one JSON list on its
last line) in a fresh process, its checkout's ``src`` first on ``PYTHONPATH``: an older checkout
is measured by today's benchmark. This checkout runs in a fresh process too, never in the
script's own: a process that has run the measure before carries what those runs left (a larger
heap for the collector to walk), and the same code measured so came out 5-9% slower than in a
fresh process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["add_version_options", "compared", "run_version", "spread", "versions"]

HERE = Path(__file__).resolve().parents[1]
"""This checkout."""


def run_version(checkout: Path, script: str, args: list[str]) -> list[float]:
    """The timings `script` prints with ``--json`` and `args`, run on `checkout`'s library in
    a fresh process."""
    command = [sys.executable, script, *args, "--json"]
    env = {**os.environ, "PYTHONPATH": str(checkout.resolve() / "src")}
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


def add_version_options(parser: argparse.ArgumentParser) -> None:
    """``--repeat``, ``--other`` and the hidden ``--json`` of a run for another checkout."""
    parser.add_argument("--repeat", type=int, default=3, help="runs a version (default: 3)")
    parser.add_argument("--other", type=Path, help="another checkout, to compare with")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)


def versions(
    args: argparse.Namespace,
    measure: Callable[[], list[float]],
    script: str,
    options: list[str],
    title: str,
) -> int:
    """`measure` ``--repeat`` times; with ``--other``, `script` with `options` on this
    checkout's library and on the other's, alternating, each run a fresh process. The report
    printed (or, with ``--json``, this run's timings alone)."""
    if args.json:
        print(json.dumps(measure()))
        return 0
    ours: list[float] = []
    theirs: list[float] = []
    for _ in range(args.repeat):
        if args.other is None:
            ours += measure()
            continue
        ours += run_version(HERE, script, options)
        theirs += run_version(args.other, script, options)
    print(compared(title, ours, theirs, args.other))
    return 0
