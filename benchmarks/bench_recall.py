"""Recall's cost on every ask: `WorkingMemory.load` with recall beside the same load without it,
on SQLite and PostgreSQL, as a conversation goes on.

    scripts/with-postgres .venv/bin/python benchmarks/bench_recall.py [--sizes 1000,5000]
    .venv/bin/python benchmarks/bench_recall.py --repeat 50          # SQLite only

Builds LoCoMo threads of each size, then runs rounds as a conversation does: an exchange (two
turns) is appended, and the thread is loaded with recall (``recall_ratio`` 0.3: the window
leaves 30% of the history share to the turns found before it) and without, in turn. A budget
of 16,000 tokens with the history share 0.5, as `bench_load` (a window of at most 8,000 tokens).
With recall a load searches the thread's turns before the window by the newest user turn's
words, so it also indexes the turns that left the window since the last search (both stores
index a turn's words when a search first reaches it). PostgreSQL is timed twice: on tables
without statistics yet, as a new database runs until autovacuum analyzes them, and after an
``ANALYZE``. Medians and p95s in ms, ratios first; it never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import workingmem as wm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _cli import add_store_options, positive_ints
from _data import read_conversations, thread_messages

MODEL = wm.ModelInfo(id="gpt-4o", context_window=128_000)
PROFILE = wm.Profile(id="default")
BUDGET_TOKENS = 16_000
RECALL_RATIO = 0.3
APPEND_LIMIT = 1_000
"""The most messages one append takes."""
WARMUP = 3

Message = dict[str, Any]
Samples = dict[str, list[int]]
"""{"without": ns, "with": ns} per load."""


async def build(store: wm.Store, messages: list[Message], size: int) -> str:
    thread = f"recall-{size}-{uuid.uuid4().hex[:8]}"
    for start in range(0, size, APPEND_LIMIT):
        await store.append(
            tenant_id="bench",
            thread_id=thread,
            messages=messages[start : min(size, start + APPEND_LIMIT)],
        )
    return thread


async def rounds(
    store: wm.Store, thread: str, messages: list[Message], at: int, repeat: int
) -> tuple[Samples, int]:
    """`repeat` timed rounds (after the warm-up) from message `at`; the samples and the next
    message's index."""
    plain = wm.WorkingMemory(store=store)
    recall = wm.WorkingMemory(store=store, config=wm.WorkingMemoryConfig(recall_ratio=RECALL_RATIO))
    samples: Samples = {"without": [], "with": []}
    for round_ in range(repeat + WARMUP):
        await store.append(tenant_id="bench", thread_id=thread, messages=messages[at : at + 2])
        at += 2
        for name, memory in (("with", recall), ("without", plain)):
            started = time.perf_counter_ns()
            await memory.load(
                tenant_id="bench",
                thread_id=thread,
                model=MODEL,
                profile=PROFILE,
                budget_tokens=BUDGET_TOKENS,
            )
            if round_ >= WARMUP:
                samples[name].append(time.perf_counter_ns() - started)
    return samples, at


async def analyze(url: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as db:
        await db.execute("ANALYZE")


async def run(args: argparse.Namespace, messages: list[Message]) -> dict[tuple[str, int], Samples]:
    results: dict[tuple[str, int], Samples] = {}
    with tempfile.TemporaryDirectory() as folder:
        stores: list[tuple[str, wm.Store]] = [
            ("SQLite", await wm.open_store(str(Path(folder) / "memory.db")))
        ]
        if args.postgres:
            stores.append(("PostgreSQL", await wm.open_store(args.postgres)))
        try:
            for name, store in stores:
                threads = {}
                for size in args.sizes:
                    progress(f"{name}: building {size:,} turns")
                    threads[size] = await build(store, messages, size)
                at = max(args.sizes)
                phases = [name] if name == "SQLite" else [f"{name}, as built", f"{name}, analyzed"]
                for phase in phases:
                    if phase.endswith("analyzed"):
                        await analyze(args.postgres)
                    for size in args.sizes:
                        progress(f"{phase}: {size:,} turns, {args.repeat} rounds")
                        samples, at = await rounds(store, threads[size], messages, at, args.repeat)
                        results[phase, size] = samples
        finally:
            for _, store in stores:
                await store.aclose()
    return results


def progress(text: str) -> None:
    print(f"bench_recall: {text}", file=sys.stderr, flush=True)


def median_ms(samples: Sequence[int]) -> float:
    return statistics.median(samples) / 1e6


def p95_ms(samples: Sequence[int]) -> float:
    ordered = sorted(samples)
    return ordered[max(0, int(len(ordered) * 0.95) - 1)] / 1e6


def report(results: dict[tuple[str, int], Samples], sizes: list[int]) -> None:
    phases = list(dict.fromkeys(phase for phase, _ in results))
    print("## Ratios (medians)\n")
    print("| turns | " + " | ".join(f"{p}: with / without recall" for p in phases) + " |")
    print("| --- |" + " --- |" * len(phases))
    for size in sizes:
        cells = [
            f"{median_ms(results[p, size]['with']) / median_ms(results[p, size]['without']):.2f}x"
            for p in phases
        ]
        print(f"| {size:,} | {' | '.join(cells)} |")
    if len(phases) > 1:
        print("\n| turns | " + " | ".join(f"{p} / SQLite, with recall" for p in phases[1:]) + " |")
        print("| --- |" + " --- |" * (len(phases) - 1))
        for size in sizes:
            base = median_ms(results[phases[0], size]["with"])
            cells = [f"{median_ms(results[p, size]['with']) / base:.2f}x" for p in phases[1:]]
            print(f"| {size:,} | {' | '.join(cells)} |")
    print("\n## Milliseconds per load, median (p95)\n")
    print("| store | turns | without recall | with recall |\n| --- | --- | --- | --- |")
    for (phase, size), samples in results.items():
        cells = [
            f"{median_ms(samples[k]):.2f} ({p95_ms(samples[k]):.2f})" for k in ("without", "with")
        ]
        print(f"| {phase} | {size:,} | {' | '.join(cells)} |")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--sizes", type=positive_ints, default=[1_000, 5_000], help="default: 1000,5000"
    )
    parser.add_argument("--repeat", type=int, default=60, help="timed rounds (default: 60)")
    add_store_options(parser)
    args = parser.parse_args(argv)
    if args.repeat < 2:
        parser.error("--repeat must be at least 2")
    conversations = read_conversations(args.data, "bench_recall")
    needed = max(args.sizes) + 2 * (args.repeat + WARMUP) * len(args.sizes) * 3
    report(asyncio.run(run(args, thread_messages(conversations, needed))), args.sizes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
