"""Compaction (``POST /v1/responses/compact``, `Gateway.compact`) of a long thread, from the
thread's stored summary, beside the same conversation compacted from scratch.

    .venv/bin/python benchmarks/bench_compact.py [--sizes 100,1000,5000] [--repeat 3]

For each size, one LoCoMo thread (see `_data`) on a SQLite file: its summary is written by the
memory's own update (as the gateway's background update writes it), then two more exchanges
are stored (not yet due for an update). Then, timed:

- **ours**: `Gateway.compact(thread_id=...)`: starts from the stored summary, the cheap model
  reads the turns after it;
- **from scratch**: `Gateway.compact(messages=...)` with the same turns as input and no summary:
  what a compaction reads without a memory (every turn, in chunks of `helper_input_max_tokens`).

The cheap model is `bench_summary`'s scripted helper on 127.0.0.1, through the real `openai`
SDK: it answers at once with a real helper's output sizes, and reports its prompt's tokens
(gpt-4o-mini's tokenizer). So the time is the gateway's own (reading the thread, chunking,
the prompts, the HTTP round trips), not a model's; a real model's time grows with the calls
and the tokens, printed beside it. Prints medians (min-max) and the ratios first; never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import workingmem as wm
from workingmem.llm import OpenAIClient
from workingmem.llm.testing import ScriptedUpstream

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _cli import positive_ints
from _data import default_data_path, read_conversations, thread_messages
from bench_summary import CHEAP, scripted_helper

TENANT = "bench"
CONFIG = wm.GatewayConfig(default_model="gpt-4o", cheap_model=CHEAP)
PROFILE = wm.Profile(id="default")


@dataclass(frozen=True, slots=True)
class Run:
    seconds: float
    calls: int
    input_tokens: int


@dataclass(frozen=True, slots=True)
class Row:
    size: int
    ours: list[Run]
    scratch: list[Run]


async def compacted(
    gateway: wm.Gateway, *, thread_id: str | None = None, messages: Sequence[wm.MessageIn] = ()
) -> Run:
    started = time.perf_counter()
    compaction = await gateway.compact(tenant_id=TENANT, thread_id=thread_id, messages=messages)
    seconds = time.perf_counter() - started
    usage = compaction.compacted.usage
    return Run(seconds, compaction.compacted.calls, usage.prompt_tokens)


async def measure(size: int, repeat: int, data: Path, folder: Path) -> Row:
    messages: list[wm.MessageIn] = list(thread_messages(read_conversations(data, "bench"), size))
    body, tail = messages[:-4], messages[-4:]
    async with (
        await wm.open_store(f"sqlite:///{folder / f'{size}.db'}") as store,
        ScriptedUpstream(responder=scripted_helper) as upstream,
        wm.Gateway(store=store, llm=OpenAIClient(base_url=upstream.base_url), config=CONFIG) as gw,
    ):
        thread = f"thread-{size}"
        for start in range(0, len(body), 1_000):
            await store.append(
                tenant_id=TENANT, thread_id=thread, messages=body[start : start + 1_000]
            )
        print(f"{size} turns: writing the summary", file=sys.stderr)
        await gw.memory.save_context(
            tenant_id=TENANT, thread_id=thread, user_id=None, profile=PROFILE, cheap_model_id=CHEAP
        )
        await store.append(tenant_id=TENANT, thread_id=thread, messages=tail)
        ours, scratch = [], []
        for _ in range(repeat):  # interleaved: a change of the machine's load hits both
            ours.append(await compacted(gw, thread_id=thread))
            scratch.append(await compacted(gw, messages=messages))
    return Row(size, ours, scratch)


def spread(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def report(rows: Sequence[Row]) -> None:
    print("compaction of a thread: from its stored summary (ours) beside from scratch")
    print("ratios (from scratch / ours, medians): calls, cheap-model input tokens, gateway time")
    for row in rows:
        calls = statistics.median(r.calls for r in row.scratch) / max(
            1, statistics.median(r.calls for r in row.ours)
        )
        tokens = statistics.median(r.input_tokens for r in row.scratch) / max(
            1, statistics.median(r.input_tokens for r in row.ours)
        )
        seconds = statistics.median(r.seconds for r in row.scratch) / statistics.median(
            r.seconds for r in row.ours
        )
        print(f"  {row.size:>6} turns: {calls:6.1f}x  {tokens:8.1f}x  {seconds:6.1f}x")
    print()
    print(f"{'turns':>6} {'who':<13} {'calls':>6} {'input tokens':>13} {'gateway ms':>20}")
    for row in rows:
        for who, runs in (("ours", row.ours), ("from scratch", row.scratch)):
            calls = statistics.median(r.calls for r in runs)
            tokens = statistics.median(r.input_tokens for r in runs)
            ms = spread([r.seconds * 1000 for r in runs])
            print(f"{row.size:>6} {who:<13} {calls:>6.0f} {tokens:>13,.0f} {ms:>20}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=positive_ints, default=[100, 1_000, 5_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data", type=Path, default=default_data_path())
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        rows = [
            asyncio.run(measure(size, args.repeat, args.data, Path(folder))) for size in args.sizes
        ]
    report(rows)


if __name__ == "__main__":
    main()
