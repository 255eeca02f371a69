"""This checkout's service beside another version's, in paired blocks: the one way a change of a
few tenths of a millisecond a request shows on a shared, noisy machine.

    git worktree add ../before <commit>                 # the version to compare with
    .venv/bin/python benchmarks/bench_pair.py --other ../before
    scripts/with-postgres .venv/bin/python benchmarks/bench_pair.py --other ../before

Each version runs as `workingmem serve` ran it then: its own ``benchmarks/bench_service.py
--serve-service`` with its own ``src`` first on ``PYTHONPATH``, one worker, in front of one
instant upstream, each on a SQLite file of its own (or both on the same PostgreSQL database:
versions of one schema, since each migrates it at start). wrk
(`_wrk`, which must be on the PATH) drives one, then the other, for short blocks, the order
swapped every block, so that the machine's drift hits both alike; each block gives each
version's server CPU a request (its processes' /proc time over the block / answers). The
report prints, per store and mode, each version's median and range, the median of the paired
differences and how many pairs went each way. Every request opens a new thread (the fixed cost
of an ask). It prints, and never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import statistics
import sys
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from _cli import POSTGRES_ENV
from _data import default_data_path, read_conversations
from _instant_upstream import ANSWER
from _processes import server_process, tree_cpu_seconds
from _wrk import run_wrk, wrk_path, wrk_version
from bench_gateway import load_average, progress
from bench_service import DATABASE_ENV, request_bodies, this_script, wait_ready

THIS = Path(__file__).resolve().parent.parent


@dataclass
class Pairs:
    """CPU ms a request of each version, block by block."""

    this: list[float] = field(default_factory=list)
    other: list[float] = field(default_factory=list)


def service_command(checkout: Path, upstream_url: str) -> list[str]:
    """The checkout's own service, as its `bench_service.py --serve-service` runs it."""
    script = checkout / "benchmarks" / "bench_service.py"
    return [sys.executable, str(script), "--serve-service", upstream_url, "--workers", "1"]


async def block_cpu_ms(
    pid: int, url: str, bodies: list[bytes], clients: int, seconds: float
) -> float:
    """One block of wrk on a service: its CPU ms a successful answer."""
    before = tree_cpu_seconds(pid)
    result = await run_wrk(
        url,
        bodies,
        {},
        clients=clients,
        seconds=seconds,
        fresh=f"pair-{uuid.uuid4().hex[:8]}-",
        marker=json.dumps(ANSWER).encode(),
    )
    if result.failed or not result.succeeded:
        raise RuntimeError(f"{url}: {result.failed} failed answers: {result.first_error}")
    return (tree_cpu_seconds(pid) - before) * 1000 / result.succeeded


async def measure(
    args: argparse.Namespace, database: str, bodies: dict[bool, list[bytes]]
) -> dict[bool, Pairs]:
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-pair-")))
        _, up_port = stack.enter_context(
            server_process("upstream", this_script("--serve-upstream"), {})
        )
        upstream = f"http://127.0.0.1:{up_port}/v1"
        services = {}
        for name, checkout in (("this", THIS), ("other", args.other.resolve())):
            url = database if database != "sqlite" else str(folder / f"{name}.db")
            env = {DATABASE_ENV: url, "PYTHONPATH": str(checkout / "src")}
            pid, port = stack.enter_context(
                server_process(f"{name} service", service_command(checkout, upstream), env)
            )
            await wait_ready(f"http://127.0.0.1:{port}/healthz")
            services[name] = (pid, f"http://127.0.0.1:{port}/v1/chat/completions")
        found: dict[bool, Pairs] = {}
        for stream in args.streams:
            pairs = found[stream] = Pairs()
            for pid, url in services.values():  # warm-up, untimed
                await block_cpu_ms(pid, url, bodies[stream], args.clients, 1)
            for block in range(args.blocks):
                order = ["this", "other"] if block % 2 == 0 else ["other", "this"]
                for name in order:
                    pid, url = services[name]
                    cpu = await block_cpu_ms(pid, url, bodies[stream], args.clients, args.seconds)
                    getattr(pairs, name).append(cpu)
                progress(
                    f"{store_name(database)} {'stream' if stream else 'json'} block {block + 1}: "
                    f"this {pairs.this[-1]:.3f} ms, other {pairs.other[-1]:.3f} ms"
                )
        return found


def store_name(database: str) -> str:
    """What the report calls a store: never its URL, which may hold a password."""
    return "SQLite" if database == "sqlite" else "PostgreSQL"


def spread(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def report(store: str, found: dict[bool, Pairs]) -> None:
    for stream, pairs in found.items():
        differences = [t - o for t, o in zip(pairs.this, pairs.other, strict=True)]
        lower = sum(d < 0 for d in differences)
        higher = sum(d > 0 for d in differences)
        print(
            f"| {store} {'stream' if stream else 'json'} | {spread(pairs.this)} | "
            f"{spread(pairs.other)} | {statistics.median(differences):+.3f} | "
            f"{lower} / {higher} / {len(differences) - lower - higher} |"
        )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--other", type=Path, required=True, help="the other version's checkout")
    parser.add_argument("--blocks", type=int, default=10, help="pairs per store and mode")
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds a block (whole)")
    parser.add_argument("--clients", type=int, default=8, help="wrk's connections")
    parser.add_argument("--stream", choices=["both", "off", "on"], default="both")
    parser.add_argument(
        "--postgres",
        metavar="URL",
        default=os.environ.get(POSTGRES_ENV),
        help=f"also PostgreSQL, both versions on this database (default: ${POSTGRES_ENV})",
    )
    parser.add_argument("--postgres-only", action="store_true", help="skip SQLite")
    parser.add_argument("--data", type=Path, default=default_data_path())
    args = parser.parse_args(argv)
    if not (args.other / "benchmarks" / "bench_service.py").is_file():
        parser.error(f"--other {args.other}: no benchmarks/bench_service.py there")
    if wrk_path() is None:
        parser.error("wrk is not on PATH (apt-get install wrk)")
    if args.blocks < 1 or args.seconds <= 0 or args.clients < 1:
        parser.error("--blocks, --seconds and --clients must be positive")
    if args.postgres_only and not args.postgres:
        parser.error("--postgres-only needs a PostgreSQL URL")
    args.streams = [False, True] if args.stream == "both" else [args.stream == "on"]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    conversations = read_conversations(args.data, "bench_pair")
    bodies = {
        stream: list(itertools.islice(request_bodies(conversations, "", stream), 512))
        for stream in args.streams
    }
    stores = ([] if args.postgres_only else ["sqlite"]) + ([args.postgres] if args.postgres else [])
    load = load_average()
    results = {store: asyncio.run(measure(args, store, bodies)) for store in stores}
    print(
        f"This checkout against {args.other}: server CPU ms a request on a fresh thread, "
        f"{args.blocks} blocks of {args.seconds:g} s each ({wrk_version()}, {args.clients} "
        f"connections, the order swapped every block); load average {load} before, "
        f"{load_average()} after"
    )
    print(
        "\n| store, mode | this, median (range) | other | paired difference, median | "
        "this lower / higher / tied |"
    )
    print("| --- | ---: | ---: | ---: | ---: |")
    for store, found in results.items():
        report(store_name(store), found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
