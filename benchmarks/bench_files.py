"""A window that holds many large files: what a load reads and what it costs, SQLite and
PostgreSQL, when it reads every file back (`file_bytes=None`, a library's load, and what every
load read before the store kept files apart) beside the gateway's load, which reads only the
files its request sends (`max_inline_file_bytes`, 24 MiB).

    scripts/with-postgres .venv/bin/python benchmarks/bench_files.py
    .venv/bin/python benchmarks/bench_files.py --photo-kb 3072 --repeat 5   # SQLite only

The thread is the first LoCoMo conversation, whose speakers share photos (77 in 419 turns):
each such user turn carries an image of `--photo-kb` KB of base64 (made up: what is measured is
the bytes, not the picture). The window is gpt-4o's default (SLIDING_WINDOW over 128,000
tokens). Loads alternate between the two ways, after one untimed load each; the median and
the spread of `--repeat` loads, and the megabytes of messages each load returned. Ratios
first.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import workingmem as wm
from workingmem.tokens import tokenizer_for

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _cli import add_store_options
from _data import Message, read_conversations

MODEL = wm.ModelInfo(id="gpt-4o", context_window=128_000)
PROFILE = wm.Profile(id="files", working_memory=wm.Strategy.SLIDING_WINDOW)
GATEWAY_FILE_BYTES = 24 * 2**20
WAYS: dict[str, int | None] = {"every file": None, "the gateway's 24 MiB": GATEWAY_FILE_BYTES}


def with_photos(messages: list[Message], photo_bytes: int) -> list[Any]:
    """The messages, each user turn that shares a photo with an image of `photo_bytes` of
    base64 (an assistant's turn takes no image)."""
    made: list[Any] = []
    for index, message in enumerate(messages):
        if message["role"] != "user" or "[shares a photo:" not in message["content"]:
            made.append(message)
            continue
        seed = f"photo {index} ".encode()
        data = base64.b64encode(seed * (photo_bytes // len(seed) * 3 // 4 + 1)).decode()
        image = {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + data}}
        text = {"type": "text", "text": message["content"]}
        made.append({"role": message["role"], "content": [text, image]})
    return made


async def measure(store: wm.ThreadStore, messages: list[Any], repeat: int) -> dict[str, Any]:
    """{way: (milliseconds of each load, megabytes it returned, files named)}."""
    await store.append(tenant_id="bench", thread_id="files", messages=messages)
    tokenizer = tokenizer_for(MODEL)  # every turn counted, as a gateway's appends count them
    await store.read_tail(
        tenant_id="bench", thread_id="files", tokenizer=tokenizer, limit=len(messages)
    )
    memory = wm.WorkingMemory(store=store)

    async def load(file_bytes: int | None) -> tuple[int, float, int]:
        started = time.perf_counter_ns()
        loaded = await memory.load(
            tenant_id="bench",
            thread_id="files",
            model=MODEL,
            profile=PROFILE,
            budget_tokens=MODEL.context_window,
            file_bytes=file_bytes,
        )
        elapsed = time.perf_counter_ns() - started
        size = len(json.dumps(loaded.messages)) / 2**20
        return elapsed, size, len(loaded.named_files)

    results: dict[str, Any] = {way: ([], 0.0, 0) for way in WAYS}
    for file_bytes in WAYS.values():
        await load(file_bytes)  # counts made and remembered; caches warm
    for _ in range(repeat):
        for way, file_bytes in WAYS.items():
            elapsed, size, named = await load(file_bytes)
            times, _, _ = results[way]
            times.append(elapsed)
            results[way] = (times, size, named)
    return results


def report(by_store: dict[str, dict[str, Any]], photos: int, photo_kb: int) -> None:
    print(f"{photos} photos of {photo_kb} KB of base64 in a thread of LoCoMo turns.\n")
    print("## Ratios (medians)\n")
    print("| store | every file / the gateway's |\n| --- | --- |")
    for store, results in by_store.items():
        every = statistics.median(results["every file"][0])
        ours = statistics.median(results["the gateway's 24 MiB"][0])
        print(f"| {store} | {every / ours:.1f}x |")
    print("\n## One load\n")
    print("| store | files read | ms, median (min-max) | MB returned | files named |")
    print("| --- | --- | ---: | ---: | ---: |")
    for store, results in by_store.items():
        for way, (times, size, named) in results.items():
            median = statistics.median(times) / 1e6
            spread = f"{min(times) / 1e6:.1f}-{max(times) / 1e6:.1f}"
            print(f"| {store} | {way} | {median:.1f} ({spread}) | {size:.1f} | {named} |")


async def run(args: argparse.Namespace) -> None:
    conversation = read_conversations(args.data, "bench_files")[0]
    messages = with_photos(conversation, args.photo_kb * 1024)
    photos = sum(1 for m in messages if isinstance(m["content"], list))
    by_store: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as folder:
        targets = [("SQLite", str(Path(folder) / "memory.db"))]
        if args.postgres:
            targets.append(("PostgreSQL", args.postgres))
        for name, target in targets:
            store = await wm.open_store(target)
            try:
                by_store[name] = await measure(store, messages, args.repeat)
                await store.delete_thread(tenant_id="bench", thread_id="files")
            finally:
                await store.aclose()
    report(by_store, photos, args.photo_kb)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=10, help="timed loads each (default: 10)")
    parser.add_argument(
        "--photo-kb", type=int, default=1024, help="base64 of each photo, KB (default: 1024)"
    )
    add_store_options(parser)
    asyncio.run(run(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
