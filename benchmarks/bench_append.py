"""Appending to a thread: one message and a batch of 100, SQLite and PostgreSQL, beside
openai-agents' `SQLiteSession.add_items` (which counts no tokens and checks no units), and the
same turns stored as the Responses API's items (each with its id, which the item index keeps).

    scripts/with-postgres .venv/bin/python benchmarks/bench_append.py
    .venv/bin/python benchmarks/bench_append.py --repeat 50      # SQLite only

Each contender appends LoCoMo turns to a thread that already holds 200 (its tokenizer
registered, as after a first load, so every append counts its turns); rounds interleave the
contenders so that a change in the machine's load hits them alike. Median and p95 in ms, and
the round trips of one append (PostgreSQL: the statements or pipeline syncs it waits for).
Ratios first.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import workingmem as wm
from workingmem.tokens import tokenizer_for

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _cli import add_store_options
from _data import Message, read_conversations, thread_messages

MODEL = wm.ModelInfo(id="gpt-4o", context_window=128_000)
START_TURNS = 200
BATCH = 100
TARGET_ONE_MS = 2.0
TARGET_BATCH_RATIO = 1.5

Append = Callable[[list[Message]], Awaitable[Any]]


class Feed:
    """LoCoMo turns, handed out in order, round and round."""

    def __init__(self, messages: list[Message]) -> None:
        self._messages = messages
        self._at = 0

    def take(self, count: int) -> list[Message]:
        taken = []
        for _ in range(count):
            taken.append(self._messages[self._at % len(self._messages)])
            self._at += 1
        return taken


def as_items(messages: list[Message]) -> list[wm.NativeItem]:
    """The messages as the Responses route stores them: each its item, with an id of its own."""
    return [
        wm.NativeItem(
            format="openai.responses",
            item={
                "items": [
                    {
                        "id": f"msg_{uuid.uuid4().hex}",
                        "type": "message",
                        "role": message["role"],
                        "content": [
                            {
                                "type": "output_text"
                                if message["role"] == "assistant"
                                else "input_text",
                                "text": message["content"],
                            }
                        ],
                    }
                ]
            },
            message=message,
        )
        for message in messages
    ]


async def our_append(store: wm.ThreadStore, feed: Feed, *, items: bool = False) -> Append:
    tenant, thread = "bench", f"append-{uuid.uuid4().hex[:8]}"
    await store.append(tenant_id=tenant, thread_id=thread, messages=feed.take(START_TURNS))
    await store.read_tail(
        tenant_id=tenant, thread_id=thread, tokenizer=tokenizer_for(MODEL), limit=START_TURNS
    )

    async def append(messages: list[Message]) -> Any:
        given: list[Any] = as_items(messages) if items else messages
        return await store.append(tenant_id=tenant, thread_id=thread, messages=given)

    return append


async def agents_append(folder: Path, feed: Feed) -> Append:
    from agents import SQLiteSession

    session = SQLiteSession("bench", folder / "agents.db")
    await session.add_items(list(feed.take(START_TURNS)))  # type: ignore[arg-type]

    async def append(messages: list[Message]) -> Any:
        return await session.add_items(list(messages))  # type: ignore[arg-type]

    return append


async def timed(append: Append, feed: Feed, count: int) -> int:
    messages = feed.take(count)
    started = time.perf_counter_ns()
    await append(messages)
    return time.perf_counter_ns() - started


def ms(samples: Sequence[int]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) / 1e6, ordered[int(len(ordered) * 0.95) - 1] / 1e6


async def run(args: argparse.Namespace, messages: list[Message]) -> dict[str, dict[int, list[int]]]:
    feed = Feed(messages)
    contenders: dict[str, Append] = {}
    stores: list[wm.ThreadStore] = []
    with tempfile.TemporaryDirectory() as folder:
        sqlite = await wm.open_store(str(Path(folder) / "memory.db"))
        stores.append(sqlite)
        contenders["ours, SQLite"] = await our_append(sqlite, feed)
        contenders["ours, SQLite, Responses items"] = await our_append(sqlite, feed, items=True)
        if args.postgres:
            postgres = await wm.open_store(args.postgres)
            stores.append(postgres)
            contenders["ours, PostgreSQL"] = await our_append(postgres, feed)
            contenders["ours, PostgreSQL, Responses items"] = await our_append(
                postgres, feed, items=True
            )
        contenders["Agents SQLiteSession"] = await agents_append(Path(folder), feed)
        samples: dict[str, dict[int, list[int]]] = {name: {1: [], BATCH: []} for name in contenders}
        for round_ in range(args.repeat + 5):
            for name, append in contenders.items():
                for count in (1, BATCH):
                    elapsed = await timed(append, feed, count)
                    if round_ >= 5:  # warm-up rounds
                        samples[name][count].append(elapsed)
        for store in stores:
            await store.aclose()
    return samples


def report(samples: dict[str, dict[int, list[int]]]) -> None:
    ours_sqlite = samples["ours, SQLite"]
    postgres = samples.get("ours, PostgreSQL")
    agents = samples["Agents SQLiteSession"]
    print("## Ratios (medians)\n")
    print("| ratio | 1 message | batch of 100 |\n| --- | --- | --- |")

    def ratio(a: dict[int, list[int]], b: dict[int, list[int]]) -> str:
        return " | ".join(
            f"{statistics.median(a[n]) / statistics.median(b[n]):.2f}x" for n in (1, BATCH)
        )

    print(f"| ours SQLite / Agents SQLiteSession | {ratio(ours_sqlite, agents)} |")
    items = samples["ours, SQLite, Responses items"]
    print(f"| ours SQLite, Responses items / chat messages | {ratio(items, ours_sqlite)} |")
    if postgres:
        print(f"| ours PostgreSQL / ours SQLite | {ratio(postgres, ours_sqlite)} |")
        pg_items = samples["ours, PostgreSQL, Responses items"]
        print(f"| ours PostgreSQL, Responses items / chat messages | {ratio(pg_items, postgres)} |")
    print("\n## Milliseconds per append, median (p95)\n")
    print("| contender | 1 message | batch of 100 |\n| --- | --- | --- |")
    for name, by_count in samples.items():
        cells = []
        for count in (1, BATCH):
            median, p95 = ms(by_count[count])
            cells.append(f"{median:.3f} ({p95:.3f})")
        print(f"| {name} | {' | '.join(cells)} |")
    if postgres:
        one = ms(postgres[1])[0]
        batch = statistics.median(postgres[BATCH]) / statistics.median(ours_sqlite[BATCH])
        print("\n## Targets\n")
        print(
            f"- PostgreSQL, one message <= {TARGET_ONE_MS} ms: {one:.3f} ms "
            f"{'PASS' if one <= TARGET_ONE_MS else 'MISS'}"
        )
        print(
            f"- PostgreSQL batch of {BATCH} <= {TARGET_BATCH_RATIO}x SQLite's: {batch:.2f}x "
            f"{'PASS' if batch <= TARGET_BATCH_RATIO else 'MISS'}"
        )
    else:
        print("\nPostgreSQL not measured (no --postgres URL).")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=100, help="timed rounds (default: 100)")
    add_store_options(parser)
    args = parser.parse_args(argv)
    if args.repeat < 2:
        parser.error("--repeat must be at least 2")
    conversations = read_conversations(args.data, "bench_append")
    messages = thread_messages(conversations, 3_000)
    report(asyncio.run(run(args, messages)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
