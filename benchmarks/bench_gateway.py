"""The gateway's own overhead per `ask`, against thread length, on SQLite and PostgreSQL.

    .venv/bin/python benchmarks/bench_gateway.py [--sizes 10,1000,10000] [--repeat 40]
    scripts/with-postgres .venv/bin/python benchmarks/bench_gateway.py    # PostgreSQL too

For each store, strategy (SUMMARY_BUFFER, SLIDING_WINDOW) and size, one LoCoMo thread (see
`_data`) is built with `store.append` in batches of 1,000, then `Gateway.ask` is timed against
an instant upstream: a `ScriptedUpstream` on 127.0.0.1 that answers "OK." at once, reached
through the real `openai` SDK (`OpenAIClient`).

What "overhead" means here: right after each timed ask, the very request the gateway sent
(`AskResult.context.messages`, same max_tokens) is sent again straight through the same
`OpenAIClient.complete` to the same upstream, and timed. overhead = ask - that direct call,
paired per ask. Both include the SDK's encoding and decoding, the loopback HTTP round trip
and the scripted server's handling (in this process), so the subtraction leaves what the
gateway adds over calling the model yourself: storing the user turn and the answer, reading
the memory, assembling and counting the request, the usage guard, submitting the update.

Background updates are drained outside the timed region: after each ask, `when_idle()` is
awaited (timed separately, as the update's own cost, split by whether an update was due),
then the direct call runs on a quiet event loop. Rounds are interleaved (each round asks
every size once), so a change in the machine's load hits every size alike.

It prints medians, p95s, ratios (largest size / smallest, largest / middle); it never asserts.
Progress goes to stderr, the report to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import os
import platform
import re
import sqlite3
import statistics
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import workingmem as wm
from _cli import POSTGRES_ENV, add_store_options, positive_ints
from _data import read_conversations, thread_messages
from workingmem.gateway import Gateway
from workingmem.gateway_config import GatewayConfig
from workingmem.llm import CallKind, CallMeta
from workingmem.llm.testing import Reply, ScriptedUpstream

Message = dict[str, Any]
Conversations = list[list[Message]]

MODEL_ID = "gpt-4o"
CHEAP_ID = "gpt-4o-mini"
DEFAULT_WINDOW = 16_000
OUTPUT_RESERVE = 1_000
DEFAULT_SIZES = (10, 1_000, 10_000)
DEFAULT_REPEAT = 60
WARMUP_ASKS = 3
APPEND_BATCH = 1_000
"""The store's per-append limit."""
MAX_GROWTH = 0.1
"""A row's thread may grow by this share of its size over the run (see `copies_needed`)."""
SUMMARY_LAG = 4
"""SUMMARY_BUFFER threads start with a summary through their 4th-newest turn (a steady state:
updates every 6 turns leave it 0-5 behind), so the first ask's update is due."""
STRATEGIES = (wm.Strategy.SUMMARY_BUFFER, wm.Strategy.SLIDING_WINDOW)
TENANT = "bench"
ANSWER = "OK."
_TURN = re.compile(r"^\[(\d+)\](?: \([^)]*\))? (user|assistant)[^:]*: (.*)$", re.MULTILINE)


# -- the instant upstream --------------------------------------------------------------------


def instant_upstream(request: dict[str, Any]) -> Reply:
    """Answers at once: "OK." to an answer request; a summary of realistic size (about
    1,500 characters and 10 facts, from the turns it is given) to a helper call."""
    if "response_format" not in request:
        return Reply(ANSWER, prompt_tokens=1_000, completion_tokens=2)
    prompt = request["messages"][-1]["content"]
    body = json.dumps(scripted_summary(prompt))
    return Reply(body, prompt_tokens=len(prompt) // 4, completion_tokens=len(body) // 4)


def scripted_summary(turns_text: str) -> dict[str, Any]:
    """The helper's answer for turns rendered ``[seq] role: text``: the user's lines as the
    summary (the newest 1,500 characters), the newest 10 turns as facts."""
    turns = _TURN.findall(turns_text)
    lines = [f"Turn {n}: {text[:100]}" for n, role, text in turns if role == "user"]
    facts = [
        {"text": text[:200], "first_turn": int(n), "last_turn": int(n)}
        for n, _, text in turns[-10:]
        if text.strip()
    ]
    return {"summary": "\n".join(lines)[-1_500:] or "Nothing yet.", "facts": facts}


# -- measuring -------------------------------------------------------------------------------


@dataclass
class Cell:
    """The samples of one (strategy, size) on one store, in nanoseconds."""

    strategy: wm.Strategy
    size: int
    thread_ids: list[str]
    """One thread; or, for a small size, a fresh copy per ask (see `copies_needed`)."""
    ask: list[int] = field(default_factory=list)
    direct: list[int] = field(default_factory=list)
    overhead: list[int] = field(default_factory=list)
    update_due: list[int] = field(default_factory=list)
    """`when_idle` after an ask whose update ran (a helper call, the state written)."""
    update_not_due: list[int] = field(default_factory=list)
    """`when_idle` after an ask whose update found nothing due (or was skipped)."""
    messages: int = 0
    tokens: int = 0
    built_last: str = ""
    """The built thread's newest turn (a user turn): no ask repeats it, or the gateway would
    take the ask for a retry of that turn."""
    asked: int = 0
    turns_seen: set[int] = field(default_factory=set)
    """The thread lengths the timed asks met (the turn being asked included)."""

    def next_thread(self) -> str:
        thread_id = self.thread_ids[self.asked % len(self.thread_ids)]
        self.asked += 1
        return thread_id


def copies_needed(size: int, asks: int) -> int:
    """Threads for one row: one, unless its asks (two turns each) would grow it by more than
    `MAX_GROWTH`; then a fresh copy per ask, so every ask meets a thread of `size` turns."""
    return 1 if 2 * asks <= MAX_GROWTH * size else asks


@dataclass
class StoreRun:
    name: str
    cells: list[Cell] = field(default_factory=list)
    note: str = ""
    """Why nothing was measured, when nothing was."""
    build_s: float = 0.0


def median_ms(samples: Sequence[int]) -> float:
    return statistics.median(samples) / 1e6


def p95_ms(samples: Sequence[int]) -> float:
    if len(samples) < 2:
        return samples[0] / 1e6
    return statistics.quantiles(samples, n=20, method="inclusive")[18] / 1e6


def questions(conversations: Conversations) -> Iterator[str]:
    """LoCoMo user turns, cycled: the messages of the timed asks."""
    texts = [m["content"] for messages in conversations for m in messages if m["role"] == "user"]
    return itertools.cycle(texts)


def model_info(window: int) -> wm.ModelInfo:
    return wm.ModelInfo(id=MODEL_ID, context_window=window, max_output_tokens=OUTPUT_RESERVE)


async def build_thread(
    store: wm.ThreadStore, tenant_id: str, thread_id: str, messages: list[Message], model: Any
) -> None:
    """Appends in batches of `APPEND_BATCH`; after the first batch the tail is read once with
    the model's tokenizer (as a real thread's first load does), so later appends count."""
    tokenizer = wm.tokenizer_for(model)
    for offset in range(0, len(messages), APPEND_BATCH):
        batch = messages[offset : offset + APPEND_BATCH]
        await store.append(tenant_id=tenant_id, thread_id=thread_id, messages=batch)
        if offset == 0:
            await store.read_tail(
                tenant_id=tenant_id, thread_id=thread_id, tokenizer=tokenizer, limit=len(batch)
            )


async def catch_up_summary(store: wm.ThreadStore, tenant_id: str, thread_id: str) -> None:
    """A summary through the thread's `SUMMARY_LAG`-th newest turn: the steady state of a
    thread (without it, the first update would fold the whole imported thread, in chunks)."""
    thread = await store.get_thread(tenant_id=tenant_id, thread_id=thread_id)
    state = await store.get_memory_state(tenant_id=tenant_id, thread_id=thread_id)
    turns = await store.list_turns(
        tenant_id=tenant_id, thread_id=thread_id, after_seq=max(0, thread.turn_count - 40), limit=40
    )
    body = scripted_summary("\n".join(f"[{t.seq}] {t.role}: {t.content}" for t in turns))
    await store.write_memory_state(
        tenant_id=tenant_id,
        thread_id=thread_id,
        write=wm.StateWrite(
            expected_version=state.version,
            summary=body["summary"],
            facts=[wm.Fact(f["text"], f["first_turn"], f["last_turn"]) for f in body["facts"]],
            turn_count=max(0, thread.turn_count - SUMMARY_LAG),
            reason="update",
        ),
    )


async def measure_store(
    run: StoreRun,
    store: wm.ThreadStore,
    tenant_id: str,
    conversations: Conversations,
    sizes: list[int],
    repeat: int,
    window: int,
) -> None:
    model = model_info(window)
    config = GatewayConfig(default_model=MODEL_ID, cheap_model=CHEAP_ID, models={MODEL_ID: model})
    profiles = [wm.Profile(id=s.value, working_memory=s) for s in STRATEGIES]
    asks = WARMUP_ASKS + repeat
    run.cells = [
        Cell(
            strategy,
            size,
            [f"{strategy.value}-{size}-{i}" for i in range(copies_needed(size, asks))],
        )
        for size in sizes
        for strategy in STRATEGIES
    ]
    start = time.perf_counter()
    for cell in run.cells:
        progress(
            f"{run.name}: building {len(cell.thread_ids)} x {cell.size:,} turns "
            f"({cell.strategy.value})"
        )
        messages = thread_messages(conversations, cell.size)
        cell.built_last = messages[-1]["content"]
        for thread_id in cell.thread_ids:
            await build_thread(store, tenant_id, thread_id, messages, model)
            if cell.strategy is wm.Strategy.SUMMARY_BUFFER:
                await catch_up_summary(store, tenant_id, thread_id)
    run.build_s = time.perf_counter() - start

    reports: list[wm.UpdateReport] = []
    texts = questions(conversations)
    async with (
        ScriptedUpstream(responder=instant_upstream) as upstream,
        wm.OpenAIClient(base_url=upstream.base_url, api_key="bench", max_retries=0) as client,
        Gateway(
            store=store, llm=client, config=config, profiles=profiles, on_report=reports.append
        ) as gateway,
    ):

        async def one(cell: Cell, *, timed: bool) -> None:
            message = next(texts)
            while message == cell.built_last:
                message = next(texts)
            before = len(reports)
            t0 = time.perf_counter_ns()
            result = await gateway.ask(
                tenant_id=tenant_id,
                thread_id=cell.next_thread(),
                user_id="u",
                profile=cell.strategy.value,
                message=message,
            )
            t1 = time.perf_counter_ns()
            await gateway.when_idle()
            t2 = time.perf_counter_ns()
            meta = CallMeta(tenant_id=tenant_id, kind=CallKind.ANSWER, model=MODEL_ID)
            await client.complete(
                model=MODEL_ID,
                messages=result.context.messages,
                meta=meta,
                max_tokens=OUTPUT_RESERVE,
            )
            t3 = time.perf_counter_ns()
            if result.answer != ANSWER:
                raise RuntimeError(f"unexpected answer {result.answer!r}")
            # one report per queued update; none when the gateway saw that nothing could be due
            new_reports = reports[before:]
            if not timed:
                return
            cell.ask.append(t1 - t0)
            cell.direct.append(t3 - t2)
            cell.overhead.append((t1 - t0) - (t3 - t2))
            if any(r.outcome is wm.UpdateOutcome.UPDATED for r in new_reports):
                cell.update_due.append(t2 - t1)
            else:
                cell.update_not_due.append(t2 - t1)
            cell.messages = len(result.context.messages)
            cell.tokens = result.context.tokens
            cell.turns_seen.add(result.turns[0].seq or 0)

        for cell in run.cells:
            for _ in range(WARMUP_ASKS):
                await one(cell, timed=False)
        progress(f"{run.name}: timing {repeat} rounds of {len(run.cells)} asks")
        gc.collect()
        for _ in range(repeat):
            for cell in run.cells:
                await one(cell, timed=True)
        failed = [r for r in reports if r.outcome not in _FINE]
        if failed:
            run.note = f"{len(failed)} updates did not succeed, e.g. {failed[0]}"


_FINE = frozenset({wm.UpdateOutcome.UPDATED, wm.UpdateOutcome.NOT_DUE, wm.UpdateOutcome.SKIPPED})


async def run_sqlite(
    conversations: Conversations, sizes: list[int], repeat: int, window: int
) -> StoreRun:
    run = StoreRun("SQLite")
    with tempfile.TemporaryDirectory(prefix="workingmem-bench-") as folder:
        async with await wm.open_store(str(Path(folder) / "bench.db")) as store:
            await measure_store(run, store, TENANT, conversations, sizes, repeat, window)
    return run


async def run_postgres(
    url: str | None, conversations: Conversations, sizes: list[int], repeat: int, window: int
) -> StoreRun:
    run = StoreRun("PostgreSQL")
    if not url:
        run.note = (
            f"not measured: no database URL ({POSTGRES_ENV} is unset and no --postgres URL); "
            "run under scripts/with-postgres for a throwaway PostgreSQL 15"
        )
        return run
    try:
        store = await wm.open_store(url)
    except (ImportError, wm.WorkingMemoryError) as exc:
        run.note = f"not measured: {exc}"
        return run
    tenant_id = f"bench-{uuid.uuid4().hex[:12]}"  # a tenant of its own in a shared database
    try:
        async with store:
            await measure_store(run, store, tenant_id, conversations, sizes, repeat, window)
    finally:
        await delete_tenant(url, tenant_id)
    return run


async def delete_tenant(url: str, tenant_id: str) -> None:
    """Removes the run's threads (the turns and states cascade); best effort."""
    import psycopg

    try:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute("DELETE FROM threads WHERE tenant_id = %s", (tenant_id,))
    except psycopg.Error as exc:
        progress(f"PostgreSQL: cleanup failed: {exc}")


# -- the report ------------------------------------------------------------------------------


def progress(text: str) -> None:
    print(f"... {text}", file=sys.stderr, flush=True)


def ms(value: float) -> str:
    return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A plain-text table: the first two columns left-aligned, the others right-aligned."""
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            cell.ljust(w) if i < 2 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    print(f"\n{title}")
    print(line(headers))
    print(line(["-" * w for w in widths]))
    for row in rows:
        print(line(row))


def span(values: set[int]) -> str:
    low, high = min(values), max(values)
    return f"{low:,}" if low == high else f"{low:,}-{high:,}"


def update_cell(samples: list[int]) -> str:
    return f"{ms(median_ms(samples))} (n={len(samples)})" if samples else "-"


def print_store(run: StoreRun, repeat: int) -> None:
    if not run.cells:
        print(f"\n{run.name}: {run.note}")
        return
    headers = [
        "strategy",
        "turns",
        "thread at ask",
        "overhead med",
        "p95",
        "ask med",
        "direct call med",
        "request",
        "update when due",
        "not due",
    ]
    rows = []
    for cell in run.cells:
        rows.append(
            [
                cell.strategy.value,
                f"{cell.size:,}",
                span(cell.turns_seen),
                ms(median_ms(cell.overhead)),
                ms(p95_ms(cell.overhead)),
                ms(median_ms(cell.ask)),
                ms(median_ms(cell.direct)),
                f"{cell.messages} msgs, {cell.tokens:,} tok",
                update_cell(cell.update_due),
                update_cell(cell.update_not_due),
            ]
        )
    print_table(
        f"{run.name}: ms per ask, {repeat} timed asks per row (threads built in "
        f"{run.build_s:.1f} s)",
        headers,
        rows,
    )
    if run.note:
        print(f"  note: {run.note}")


def print_ratios(runs: list[StoreRun], sizes: list[int]) -> None:
    if len(sizes) < 2:
        return
    small, large = sizes[0], sizes[-1]
    middle = sizes[-2]
    print(f"\nRatios of the median overhead: {large:,} turns / {small:,} turns", end="")
    print(f"; {large:,} / {middle:,} (the same request size)" if middle != small else "")
    for run in runs:
        by_key = {(c.strategy, c.size): c for c in run.cells}
        for strategy in STRATEGIES:
            if (strategy, large) not in by_key:
                continue
            top = median_ms(by_key[strategy, large].overhead)
            parts = [f"{top / median_ms(by_key[strategy, small].overhead):.2f}x"]
            if middle != small:
                parts.append(f"{top / median_ms(by_key[strategy, middle].overhead):.2f}x")
            print(f"  {run.name} {strategy.value}: {' ; '.join(parts)}")


def load_average() -> str:
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "unknown"


def print_header(
    data: Path, conversations: Conversations, url: str | None, window: int, load_before: str
) -> None:
    model = model_info(window)
    tokenizer = wm.tokenizer_for(model)
    flat = [m for messages in conversations for m in messages]
    print(
        f"workingmem {wm.__version__}: Gateway.ask overhead, {MODEL_ID} ({tokenizer.key}), "
        f"window {window:,} tokens, output reserve {OUTPUT_RESERVE:,}; the memory's defaults "
        "(history share 0.5; SUMMARY_BUFFER: recent 12 turns, update every 6)"
    )
    print(
        f"machine: {platform.platform()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, SQLite {sqlite3.sqlite_version}"
    )
    print(f"load average (1 min): {load_before} before the run, {load_average()} after")
    print(
        f"data: {data.name}: LoCoMo (CC BY-NC 4.0), {len(conversations)} conversations, "
        f"{len(flat):,} turns cycled"
    )
    if url:
        where = urlsplit(url)  # no user or password in the report
        print(f"PostgreSQL: {where.hostname}:{where.port}{where.path}")


NOTES = [
    "overhead = ask - direct call, paired per ask: right after each ask, the request it sent "
    "(same messages, same max_tokens) goes straight through the same OpenAIClient.complete to "
    "the same instant upstream. Both include the openai SDK, a loopback HTTP round trip (a new "
    "connection per request: the scripted server speaks HTTP/1.0) and the scripted server's "
    "handling in a thread of this process; the difference is what the gateway adds: storing "
    "the user turn and the answer, reading the memory (turns, state), assembling and counting "
    "the request, the usage guard, submitting the background update. Timing the upstream "
    "from inside the responder would miss the SDK and HTTP work around it, which the direct "
    "call repeats exactly.",
    "ask med / direct call med: the two raw timings, for scale; the SDK's cost grows with the "
    "request (it walks every message to transform it), which is why both grow with it.",
    "thread at ask: the thread's turns when the timed asks met it, the asked turn included. "
    "Each ask adds two turns; a row whose thread would grow by more than 10% over the run asks "
    "a fresh copy each time instead (the 10-turn rows).",
    "request: the messages and tokens of the last timed ask's request (system prompt "
    "included). SLIDING_WINDOW fills half the budget once the thread is long enough, so its "
    "request at 1,000 turns and up is many times the one at 10 (hence the 10,000 / 1,000 "
    "ratio: same request, only the thread's length differs); SUMMARY_BUFFER sends the notes "
    "and the newest 12 turns at every size.",
    "update when due / not due: the background update after the ask (`when_idle`, outside the "
    "ask's timing), median ms and count. When due it reads the new turns, calls the cheap "
    "model once (the same instant upstream, through the SDK: the call is included) and writes "
    "the state; not due: no job was queued (the gateway saw nothing could be due) or the job "
    "only checked. SLIDING_WINDOW queues none.",
    "SUMMARY_BUFFER threads start with a summary through their 4th-newest turn (updates every "
    "6 turns keep it 0-5 turns behind), so the first ask's update is due, then every third.",
]


def print_notes() -> None:
    print("\nWhat each figure times")
    for note in NOTES:
        print(textwrap.fill(note, width=100, initial_indent="  ", subsequent_indent="    "))


# -- entry point -----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        type=positive_ints,
        default=list(DEFAULT_SIZES),
        help="thread lengths in turns, comma-separated (default: 10,1000,10000)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=DEFAULT_REPEAT,
        help=f"timed asks per row (default: {DEFAULT_REPEAT})",
    )
    parser.add_argument(
        "--window",
        type=int,
        default=DEFAULT_WINDOW,
        help=f"the model's context window in tokens (default: {DEFAULT_WINDOW:,})",
    )
    add_store_options(parser)
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.window <= OUTPUT_RESERVE + 500:
        parser.error(f"--window must leave room beside the {OUTPUT_RESERVE:,}-token reserve")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    conversations = read_conversations(args.data, "bench_gateway")
    sizes: list[int] = args.sizes
    load_before = load_average()
    runs = [
        asyncio.run(run_sqlite(conversations, sizes, args.repeat, args.window)),
        asyncio.run(run_postgres(args.postgres, conversations, sizes, args.repeat, args.window)),
    ]
    print_header(args.data, conversations, args.postgres, args.window, load_before)
    for run in runs:
        print_store(run, args.repeat)
    print_ratios([run for run in runs if run.cells], sizes)
    print_notes()
    return 0


if __name__ == "__main__":
    sys.exit(main())
