"""Load latency against thread length, on SQLite and PostgreSQL, beside LangChain and LlamaIndex.

    .venv/bin/python benchmarks/bench_load.py [--sizes 100,1000] [--repeat 50] [--postgres URL]
    scripts/with-postgres .venv/bin/python benchmarks/bench_load.py    # PostgreSQL too
    .venv/bin/python benchmarks/bench_load.py --plot docs/assets/benchmarks   # and the chart

Builds LoCoMo threads of 100 to 100,000 turns (see `_data`), then times, in one run:

- ``WorkingMemory.load`` (SLIDING_WINDOW, gpt-4o, ``budget_tokens=16_000``, history share
  0.5, so a window of at most 8,000 tokens) on a temporary SQLite file and on PostgreSQL (the
  URL in ``WORKINGMEM_TEST_POSTGRES_URL`` or ``--postgres``);
- langchain-core's ``trim_messages`` and llama-index-core's ``ChatMemoryBuffer.get`` on the
  same thread, held in memory, with the same 8,000 tokens and the same tokenizer (tiktoken
  o200k_base through ``workingmem.tokenizer_for``);
- openai-agents' ``SQLiteSession.get_items(limit=K)`` on a SQLite file holding the same
  thread, K being the number of messages of our window at that size (it counts no tokens:
  the store read alone);
- the floor: the thread's token counts already in a Python list, walked back to the budget.

It prints medians, p95s, ratios and the targets with PASS/MISS; it never asserts. Progress
goes to stderr, the report to stdout. Peers need the ``bench`` extra
(``pip install -e '.[bench]'``); without one, the report says why it was not run. With
``--plot DIR`` it also writes ``DIR/load-latency.svg``: the medians against thread length,
log-log, a line per contender (the documentation site's chart).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import workingmem as wm
from _cli import POSTGRES_ENV, add_store_options, positive_ints
from _data import read_conversations, thread_messages
from _plot import Line, line_chart

Message = dict[str, Any]
Conversations = list[list[Message]]

MODEL = wm.ModelInfo(id="gpt-4o", context_window=128_000)
PROFILE = wm.Profile(id="default")
BUDGET_TOKENS = 16_000
WINDOW_TOKENS = 8_000
"""The peers' limit: ``chat_history_ratio`` 0.5 of `BUDGET_TOKENS`, the share our window gets."""
DEFAULT_SIZES = (100, 1_000, 10_000, 100_000)
DEFAULT_REPEAT = 50
APPEND_BATCH = 1_000
"""The store's per-append limit."""
WARMUP_LOADS = 5
SLOW_CALL_S = 5.0
"""A peer whose call took longer than this at one size is not run at the next ones."""
CALL_CEILING_S = 30.0
"""A peer whose call is projected (from its growth so far) to exceed this is not run."""
CELL_BUDGET_S = 10.0
"""A peer's calls stop at this much measured time per size (at least one call)."""
TARGET_RATIO = 1.5
TARGET_SQLITE_MS = 1.0
TARGET_SQLITE_SIZE = 10_000
AGENTS_TARGETS = {"SQLite": 1.0, "PostgreSQL": 1.5, "PostgreSQL analyzed": 1.5}
"""The most each store's load may take, as a multiple of openai-agents' get_items(K)."""
PLOT_FILE = "load-latency.svg"
PLOT_LABELS = {
    "SQLite": "workingmem load, SQLite",
    "PostgreSQL": "workingmem load, PostgreSQL (as built)",
    "PostgreSQL analyzed": "workingmem load, PostgreSQL",
    "LangChain": "LangChain trim_messages",
    "LlamaIndex": "LlamaIndex ChatMemoryBuffer.get",
    "Agents SQLiteSession": "openai-agents SQLiteSession.get_items(K)",
    "floor": "floor: counts in a list, walked back",
}
"""Each contender's name in the chart's legend: what is timed, not only whose."""
TARGETS = (
    "load at 100,000 turns within 1.5x of 100 turns; under 1 ms on SQLite at 10,000 turns; "
    "no slower than openai-agents' SQLiteSession.get_items(K) on SQLite, 1.5x on PostgreSQL"
)


# -- measuring -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    """The durations of the measured calls, in nanoseconds."""

    samples_ns: tuple[int, ...]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ns) / 1e6

    @property
    def p95_ms(self) -> float:
        if len(self.samples_ns) < 2:
            return self.samples_ns[0] / 1e6
        return statistics.quantiles(self.samples_ns, n=20, method="inclusive")[18] / 1e6

    @property
    def slowest_s(self) -> float:
        return max(self.samples_ns) / 1e9


Result = Timing | str
"""A measurement, or why there is none."""


@dataclass
class Run:
    """What one contender gave at each size."""

    name: str
    loads: dict[int, Result] = field(default_factory=dict)
    windows: dict[int, list[Message]] = field(default_factory=dict)
    build_rate: dict[int, float] = field(default_factory=dict)
    """Append throughput in turns per second (stores only)."""
    note: str = ""
    """Why nothing was measured, when nothing was."""
    detail: str = ""
    """A fact that explains the figures, printed under the tables."""


def time_sync(call: Callable[[], Any], *, repeat: int) -> tuple[Timing, Any]:
    """One untimed call, then up to `repeat` timed ones within `CELL_BUDGET_S`.

    A warm-up call slower than `SLOW_CALL_S` is kept as the only sample: repeating it would
    cost minutes and tell little more. Returns the timing and the last call's result.
    """
    start = time.perf_counter_ns()
    result = call()
    first = time.perf_counter_ns() - start
    if first > SLOW_CALL_S * 1e9:
        return Timing((first,)), result
    gc.collect()
    samples: list[int] = []
    while len(samples) < repeat and (not samples or sum(samples) < CELL_BUDGET_S * 1e9):
        start = time.perf_counter_ns()
        result = call()
        samples.append(time.perf_counter_ns() - start)
    return Timing(tuple(samples)), result


# -- our stores ------------------------------------------------------------------------------


async def build_thread(
    store: wm.ThreadStore, tenant_id: str, thread_id: str, messages: list[Message]
) -> float:
    """Appends `messages` in batches of `APPEND_BATCH`; returns the turns appended a second.

    After the first batch the tail is read once with the model's tokenizer, as a real
    thread's first load does: from then on every append stores each turn's token count, and
    that counting is part of the throughput.
    """
    tokenizer = wm.tokenizer_for(MODEL)
    start = time.perf_counter_ns()
    for offset in range(0, len(messages), APPEND_BATCH):
        batch = messages[offset : offset + APPEND_BATCH]
        await store.append(tenant_id=tenant_id, thread_id=thread_id, messages=batch)
        if offset == 0:
            await store.read_tail(
                tenant_id=tenant_id, thread_id=thread_id, tokenizer=tokenizer, limit=len(batch)
            )
    return len(messages) / ((time.perf_counter_ns() - start) / 1e9)


async def build_threads(
    run: Run, store: wm.ThreadStore, tenant_id: str, conversations: Conversations, sizes: list[int]
) -> None:
    """Builds one thread per size for `tenant_id`."""
    for size in sizes:
        progress(f"{run.name}: building a thread of {size:,} turns")
        messages = thread_messages(conversations, size)
        run.build_rate[size] = await build_thread(store, tenant_id, _thread_id(size), messages)


async def time_loads(
    run: Run, store: wm.ThreadStore, tenant_id: str, sizes: list[int], repeat: int
) -> None:
    """Times `repeat` loads of each size's thread, after `WARMUP_LOADS` untimed ones.

    Interleaved: each round loads every size once, so a change in the machine's load during
    the run (other processes) hits all sizes alike and the ratios between sizes stay fair.
    """
    memory = wm.WorkingMemory(
        store=store, config=wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW)
    )
    loads = {
        size: partial(
            memory.load,
            tenant_id=tenant_id,
            thread_id=_thread_id(size),
            model=MODEL,
            profile=PROFILE,
            budget_tokens=BUDGET_TOKENS,
        )
        for size in sizes
    }
    for size, load in loads.items():
        run.windows[size] = (await load()).messages
        for _ in range(WARMUP_LOADS):
            await load()
    progress(f"{run.name}: timing {repeat} rounds of loads at {len(sizes)} sizes")
    samples: dict[int, list[int]] = {size: [] for size in sizes}
    gc.collect()
    for _ in range(repeat):
        for size, load in loads.items():
            start = time.perf_counter_ns()
            await load()
            samples[size].append(time.perf_counter_ns() - start)
    run.loads.update((size, Timing(tuple(found))) for size, found in samples.items())


def _thread_id(size: int) -> str:
    return f"locomo-{size}"


async def run_sqlite(conversations: Conversations, sizes: list[int], repeat: int) -> Run:
    run = Run("SQLite")
    with tempfile.TemporaryDirectory(prefix="workingmem-bench-") as folder:
        async with await wm.open_store(str(Path(folder) / "bench.db")) as store:
            await build_threads(run, store, "bench", conversations, sizes)
            await time_loads(run, store, "bench", sizes, repeat)
    return run


async def run_postgres(
    url: str | None, conversations: Conversations, sizes: list[int], repeat: int
) -> list[Run]:
    """Times loads twice: as built, then after an ANALYZE of the store's tables.

    As built, the planner's statistics may predate the appends (autovacuum analyzes within a
    minute or so, on its own schedule): what a thread imported or grown in a burst meets.
    After ANALYZE is the steady state. The two differ when the plan depends on statistics.
    """
    built, analyzed = Run("PostgreSQL"), Run("PostgreSQL analyzed")
    if not url:
        built.note = (
            f"not measured: no database URL ({POSTGRES_ENV} is unset and no --postgres URL); "
            "run under scripts/with-postgres for a throwaway PostgreSQL 15"
        )
        return [built]
    try:
        store = await wm.open_store(url)
    except (ImportError, wm.WorkingMemoryError) as exc:
        built.note = f"not measured: {exc}"
        return [built]
    tenant_id = f"bench-{uuid.uuid4().hex[:12]}"  # a tenant of its own in a shared database
    try:
        async with store:
            await build_threads(built, store, tenant_id, conversations, sizes)
            built.detail = await analyze_state(url)
            await time_loads(built, store, tenant_id, sizes, repeat)
            progress("PostgreSQL: ANALYZE threads, turns, turn_tokens")
            await postgres_admin(url, "ANALYZE threads, turns, turn_tokens")
            await time_loads(analyzed, store, tenant_id, sizes, repeat)
    finally:
        await postgres_admin(url, "DELETE FROM threads WHERE tenant_id = %s", (tenant_id,))
    return [built, analyzed]


async def analyze_state(url: str) -> str:
    """What the planner's statistics knew of ``turn_tokens`` when the as-built timing began."""
    rows = await postgres_admin(
        url,
        "SELECT n_live_tup, n_mod_since_analyze, last_analyze, last_autoanalyze "
        "FROM pg_stat_user_tables WHERE relname = 'turn_tokens'",
    )
    if not rows:
        return "turn_tokens: no statistics row"
    live, changed, manual, auto = rows[0]
    last = max((t for t in (manual, auto) if t is not None), default=None)
    when = "never analyzed" if last is None else f"last analyzed {last:%H:%M:%S}"
    return (
        f"when its timing began, pg_stat_user_tables said of turn_tokens: ~{live:,} live rows, "
        f"{changed:,} changed since the last ANALYZE, {when}"
    )


async def postgres_admin(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Runs one statement outside the store (which has neither ANALYZE nor delete); best
    effort: a failure is reported on stderr, not raised. The DELETE cascades to the turns, so
    a shared database keeps nothing of the run."""
    import psycopg

    try:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            cursor = await conn.execute(sql, params)
            return await cursor.fetchall() if cursor.description else []
    except psycopg.Error as exc:
        progress(f"PostgreSQL: {sql.split()[0]} failed: {exc}")
        return []


# -- peers -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prepared:
    """A peer holding one thread in memory."""

    call: Callable[[], Sequence[Any]]
    """The timed call: the window for one request, from the history already in memory."""
    as_messages: Callable[[Sequence[Any]], list[Message]]
    """The call's result as chat dicts (untimed), to compare windows."""


@dataclass(frozen=True)
class Peer:
    excludes: str
    """What its figure leaves out, printed under the tables."""
    prepare: Callable[[list[Message]], Prepared]


def to_dict(role: str, content: Any) -> Message:
    return {"role": "user" if role in ("human", "user") else "assistant", "content": content}


def langchain_peer() -> Peer:
    """``trim_messages`` over LangChain messages, counted with our tokenizer."""
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, trim_messages

    def count(messages: list[BaseMessage]) -> int:
        # A list counter: what our load counts (chat overhead and reply priming included).
        return wm.count_tokens([to_dict(m.type, m.content) for m in messages], MODEL)

    def prepare(history: list[Message]) -> Prepared:
        kinds = {"user": HumanMessage, "assistant": AIMessage}
        messages = [kinds[m["role"]](content=m["content"]) for m in history]

        def call() -> list[BaseMessage]:
            return trim_messages(
                messages,
                strategy="last",
                token_counter=count,
                max_tokens=WINDOW_TOKENS,
                start_on="human",
                include_system=False,
                allow_partial=False,
            )

        return Prepared(call, lambda window: [to_dict(m.type, m.content) for m in window])

    return Peer(
        excludes=(
            "trim_messages(history): a list of BaseMessage already in memory; excludes loading "
            "or saving the history (no store); recounts the whole history on every call"
        ),
        prepare=prepare,
    )


def llama_index_peer() -> Peer:
    """``ChatMemoryBuffer.get`` over an in-memory chat store, counted with our tokenizer.

    No network: the import fetches nothing (NLTK data is fetched only by text splitters, which
    this never touches) and passing ``tokenizer_fn`` keeps LlamaIndex from building its default
    tiktoken tokenizer, which would download cl100k_base. Checked with the network switched off.
    """
    from llama_index.core.base.llms.types import ChatMessage, MessageRole
    from llama_index.core.memory import ChatMemoryBuffer

    tokenizer = wm.tokenizer_for(MODEL)

    def tokenize(text: str) -> Sequence[int]:
        # ChatMemoryBuffer only takes len() of what tokenizer_fn returns: a range is free.
        return range(tokenizer.count_text(text))

    def prepare(history: list[Message]) -> Prepared:
        roles = {"user": MessageRole.USER, "assistant": MessageRole.ASSISTANT}
        messages = [ChatMessage(role=roles[m["role"]], content=m["content"]) for m in history]
        memory = ChatMemoryBuffer.from_defaults(
            chat_history=messages,
            token_limit=WINDOW_TOKENS,
            tokenizer_fn=cast("Callable[[str], list[Any]]", tokenize),
        )
        return Prepared(
            memory.get, lambda window: [to_dict(m.role.value, m.content) for m in window]
        )

    return Peer(
        excludes=(
            "ChatMemoryBuffer.get(): the history already in its in-memory SimpleChatStore; "
            "excludes loading or saving it; counts the message texts only (joined with spaces, "
            "no per-message overhead), so its window holds a few more messages; re-tokenizes "
            "the remaining suffix after dropping each message (quadratic)"
        ),
        prepare=prepare,
    )


def openai_agents_peer(window_sizes: dict[int, int]) -> Peer:
    """``SQLiteSession.get_items(limit=K)``: the same K messages as our window, read from a
    SQLite file by the SDK's own session (a store read, no token counting). Its calls are
    async: they run on an event loop of the peer's own, kept for the run."""
    from agents import SQLiteSession

    loop = asyncio.new_event_loop()
    folder = tempfile.mkdtemp(prefix="workingmem-bench-agents-")

    def prepare(history: list[Message]) -> Prepared:
        session = SQLiteSession(f"bench-{len(history)}", Path(folder) / f"{len(history)}.db")
        for offset in range(0, len(history), APPEND_BATCH):
            batch = history[offset : offset + APPEND_BATCH]
            loop.run_until_complete(session.add_items(cast(Any, batch)))
        limit = window_sizes.get(len(history), 0)

        def call() -> list[Any]:
            return loop.run_until_complete(session.get_items(limit=limit))

        return Prepared(call, lambda window: [to_dict(m["role"], m["content"]) for m in window])

    return Peer(
        excludes=(
            "SQLiteSession.get_items(K): the K newest items of its own SQLite table, K given "
            "(our window's length at that size); counts no tokens, so it cannot choose K itself"
        ),
        prepare=prepare,
    )


def floor_peer() -> Peer:
    """What a window costs once everything is in memory: the turns' token counts in a list,
    walked back from the newest until the budget is spent."""
    tokenizer = wm.tokenizer_for(MODEL)

    def prepare(history: list[Message]) -> Prepared:
        counts = [tokenizer.count_message(m) for m in history]

        def call() -> list[Message]:
            total, start = tokenizer.reply_overhead, len(history)
            while start > 0 and total + counts[start - 1] <= WINDOW_TOKENS:
                start -= 1
                total += counts[start]
            return history[start:]

        return Prepared(call, list)

    return Peer(
        excludes=(
            "the floor: counts precomputed in a list, no store, no units, no validity rules "
            "(it may open on an assistant turn)"
        ),
        prepare=prepare,
    )


def run_peer(
    name: str,
    factory: Callable[[], Peer],
    conversations: Conversations,
    sizes: list[int],
    repeat: int,
) -> tuple[Run, str]:
    """Times one peer at every size it can do in reasonable time; returns it and what it
    excludes."""
    try:
        peer = factory()
    except ImportError as exc:
        return Run(name, note=f"not run: {exc} (pip install -e '.[bench]')"), ""
    run = Run(name)
    points: list[tuple[int, float, float]] = []  # (size, median s, slowest s)
    skip: str | None = None
    for size in sizes:
        skip = skip or skip_reason(points, size)
        if skip:
            run.loads[size] = skip
            continue
        progress(f"{name}: timing at {size:,} turns")
        prepared = peer.prepare(thread_messages(conversations, size))
        try:
            timing, window = time_sync(prepared.call, repeat=repeat)
        except Exception as exc:  # a peer that breaks must not end the benchmark
            run.loads[size] = skip = f"failed: {type(exc).__name__}: {exc}"
            continue
        run.loads[size] = timing
        run.windows[size] = prepared.as_messages(window)
        points.append((size, timing.median_ms / 1e3, timing.slowest_s))
    return run, peer.excludes


def skip_reason(points: list[tuple[int, float, float]], size: int) -> str | None:
    """Why a peer is not run at `size`, judging from the sizes before; None to run it."""
    if not points:
        return None
    last_size, last_median, last_slowest = points[-1]
    if last_slowest > SLOW_CALL_S:
        return f"skipped: > {SLOW_CALL_S:g} s at previous size"
    growth = 1.0
    if len(points) > 1:
        before_size, before_median, _ = points[-2]
        growth = max(1.0, math.log(last_median / before_median) / math.log(last_size / before_size))
    projected = last_median * (size / last_size) ** growth
    if projected > CALL_CEILING_S:
        return f"skipped: ~{projected:,.0f} s a call projected (grows ~n^{growth:.1f})"
    return None


# -- the report ------------------------------------------------------------------------------


def progress(text: str) -> None:
    print(f"... {text}", file=sys.stderr, flush=True)


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A plain-text table: the first column left-aligned, the others right-aligned."""
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        first, *rest = (
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(cells, widths, strict=True))
        )
        return "  ".join([first, *rest]).rstrip()

    print(f"\n{title}")
    print(line(headers))
    print(line(["-" * w for w in widths]))
    for row in rows:
        print(line(row))


def ms(value: float) -> str:
    return f"{value:,.3f}" if value < 10 else f"{value:,.0f}"


def cell(result: Result | None, repeat: int) -> str:
    if result is None:
        return "-"
    if isinstance(result, str):
        return result
    n = len(result.samples_ns)
    suffix = "" if n == repeat else f"  n={n}"
    return f"{ms(result.median_ms)} ({ms(result.p95_ms)}){suffix}"


def ratio(peer: Result | None, ours: Result | None) -> str:
    if isinstance(peer, Timing) and isinstance(ours, Timing):
        value = peer.median_ms / ours.median_ms
        return f"{value:,.1f}x" if value < 10 else f"{value:,.0f}x"
    return "-"


def print_latency(sizes: list[int], stores: list[Run], peers: list[Run], repeat: int) -> None:
    """Ours on each store, then each peer and its median over ours on SQLite."""
    measured = [run for run in stores if not run.note]
    sqlite = measured[0]
    headers = ["turns", *(f"ours {run.name}" for run in measured)]
    for peer in peers:
        headers += [peer.name, f"{peer.name} / ours SQLite"]
    rows = []
    for size in sizes:
        row = [f"{size:,}", *(cell(run.loads.get(size), repeat) for run in measured)]
        for peer in peers:
            mine = peer.loads.get(size)
            row += [peer.note or cell(mine, repeat), ratio(mine, sqlite.loads.get(size))]
        rows.append(row)
    print_table(
        f"Latency of one request's window, ms: median (p95); {repeat} calls unless n= says "
        f"(a peer stops after ~{CELL_BUDGET_S:g} s of calls at a size)",
        headers,
        rows,
    )


def window_text(run: Run, size: int) -> str:
    window = run.windows.get(size)
    if window is None:
        return "-"
    return f"{len(window)} msgs, {wm.count_tokens(window, MODEL):,} tok"


def print_windows(sizes: list[int], ours: Run, peers: list[Run]) -> None:
    headers = ["turns", "ours", *(f"{peer.name}" for peer in peers), "LangChain == ours"]
    rows = []
    for size in sizes:
        langchain = next((p.windows.get(size) for p in peers if p.name == "LangChain"), None)
        same = "-" if langchain is None else ("yes" if langchain == ours.windows[size] else "NO")
        rows.append(
            [f"{size:,}", window_text(ours, size), *(window_text(p, size) for p in peers), same]
        )
    print_table(
        "Windows (tokens counted by workingmem, chat format, reply priming included; "
        f"limit {WINDOW_TOKENS:,})",
        headers,
        rows,
    )


def print_build(sizes: list[int], stores: list[Run]) -> None:
    measured = [run for run in stores if run.build_rate]
    rows = [[f"{size:,}", *(f"{run.build_rate[size]:,.0f}" for run in measured)] for size in sizes]
    print_table(
        f"Build (side figure): append throughput, turns/s, batches of {APPEND_BATCH:,}, "
        "token counts stored",
        ["turns", *(run.name for run in measured)],
        rows,
    )


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def target_lines(sizes: list[int], stores: list[Run], peers: Sequence[Run] = ()) -> list[str]:
    lines = []
    small, large = min(sizes), max(sizes)
    for run in stores:
        if run.note:
            lines.append(f"{run.name}: {run.note}")
            continue
        a, b = run.loads[small], run.loads[large]
        if small == 100 and large == 100_000 and isinstance(a, Timing) and isinstance(b, Timing):
            value = b.median_ms / a.median_ms
            lines.append(
                f"{run.name}: load(100,000) / load(100) = {value:.2f}x "
                f"(target <= {TARGET_RATIO}x)  {verdict(value <= TARGET_RATIO)}"
            )
        else:
            lines.append(f"{run.name}: load(100,000) / load(100): not measured (needs both sizes)")
    sqlite = next(run for run in stores if run.name == "SQLite")
    at = sqlite.loads.get(TARGET_SQLITE_SIZE)
    if isinstance(at, Timing):
        lines.append(
            f"SQLite: load at {TARGET_SQLITE_SIZE:,} turns = {at.median_ms:.3f} ms median "
            f"(target < {TARGET_SQLITE_MS:g} ms)  {verdict(at.median_ms < TARGET_SQLITE_MS)}"
        )
    else:
        lines.append(f"SQLite: load at {TARGET_SQLITE_SIZE:,} turns: not measured")
    agents = next((run for run in peers if run.name == "Agents SQLiteSession"), None)
    for run in stores:
        limit = AGENTS_TARGETS.get(run.name)
        if agents is None or agents.note or run.note or limit is None:
            continue
        for size in sizes:
            ours, theirs = run.loads.get(size), agents.loads.get(size)
            if isinstance(ours, Timing) and isinstance(theirs, Timing):
                value = ours.median_ms / theirs.median_ms
                lines.append(
                    f"{run.name}: load / Agents get_items(K) at {size:,} turns = {value:.2f}x "
                    f"(target <= {limit:g}x)  {verdict(value <= limit)}"
                )
    return lines


def print_header(
    data: Path, conversations: Conversations, postgres: tuple[str | None, Run], load_before: str
) -> None:
    tokenizer = wm.tokenizer_for(MODEL)
    flat = [m for messages in conversations for m in messages]
    per_turn = sum(tokenizer.count_message(m) for m in flat) / len(flat)
    print(
        f"workingmem {wm.__version__}: WorkingMemory.load, SLIDING_WINDOW, {MODEL.id} "
        f"({tokenizer.key}), budget {BUDGET_TOKENS:,} x history share 0.5 = window <= "
        f"{WINDOW_TOKENS:,} tokens"
    )
    print(
        f"machine: {platform.platform()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"{package_versions()}"
    )
    print(f"load average (1 min): {load_before} before the run, {load_average()} after")
    print(
        f"data: {data.name}: LoCoMo (CC BY-NC 4.0), {len(conversations)} conversations, "
        f"{len(flat):,} turns cycled, {per_turn:.1f} tokens a turn"
    )
    url, run = postgres
    if run.note:
        print(f"PostgreSQL: {run.note}")
    elif url:
        where = urlsplit(url)  # no user or password in the report
        print(f"PostgreSQL: {where.hostname}:{where.port}{where.path}")
    print(f"targets: {TARGETS}")


def load_average() -> str:
    """Other processes' CPU use skews the figures; this says how busy the machine was."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "unknown"


def package_versions() -> str:
    found = []
    for name in ("langchain-core", "llama-index-core"):
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} not installed")
    return ", ".join(found)


def print_report(
    sizes: list[int], stores: list[Run], peers: list[tuple[Run, str]], repeat: int
) -> None:
    peer_runs = [run for run, _ in peers]
    print_latency(sizes, stores, peer_runs, repeat)
    print_windows(sizes, stores[0], [run for run in peer_runs if not run.note])
    print_build(sizes, stores)
    print("\nTargets (printed, never asserted)")
    for line in target_lines(sizes, stores, peer_runs):
        print(f"  {line}")
    print("\nWhat each figure times")
    notes = [
        "ours: WorkingMemory.load: reads the thread's tail newest first from the database "
        "(a SQLite file; PostgreSQL over loopback TCP), decodes it and picks the window; "
        "token counts come from the per-turn cache written at append, nothing is re-tokenized",
        *(f"{run.name}: {run.detail}" for run in stores if run.detail),
        *(f"{run.name}: {run.note or excludes}" for run, excludes in peers),
    ]
    for note in notes:
        print(
            textwrap.fill(
                note,
                width=100,
                initial_indent="  ",
                subsequent_indent="    ",
                break_on_hyphens=False,
            )
        )


def plot(sizes: list[int], stores: list[Run], peers: list[Run], folder: Path) -> Path:
    """The latency table's medians as lines, log-log. PostgreSQL is drawn after ANALYZE (the
    steady state; as built is in the table: one more line, close to it, would only crowd the
    chart). A peer that was skipped or failed at a size has no point there: its line ends
    where its measurements do."""
    analyzed = any(run.name == "PostgreSQL analyzed" and not run.note for run in stores)
    lines = []
    for run in [*stores, *peers]:
        if analyzed and run.name == "PostgreSQL":
            continue
        measured = [(size, run.loads[size]) for size in sizes if size in run.loads]
        points = [(size, t.median_ms) for size, t in measured if isinstance(t, Timing)]
        if points:
            lines.append(
                Line(
                    PLOT_LABELS.get(run.name, run.name),
                    [size for size, _ in points],
                    [median for _, median in points],
                    dashed=run not in stores,
                )
            )
    return line_chart(
        folder / PLOT_FILE,
        title=f"Latency of one request's window (<= {WINDOW_TOKENS:,} tokens), median",
        x_label="thread length (turns)",
        y_label="latency per call (ms, median)",
        lines=lines,
        log_x=True,
        log_y=True,
    )


# -- entry point -----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        type=positive_ints,
        default=list(DEFAULT_SIZES),
        help="thread lengths in turns, comma-separated (default: 100,1000,10000,100000)",
    )
    parser.add_argument(
        "--repeat", type=int, default=DEFAULT_REPEAT, help="timed calls per size (default: 50)"
    )
    add_store_options(parser)
    parser.add_argument(
        "--plot", type=Path, metavar="DIR", help=f"also write DIR/{PLOT_FILE} (needs matplotlib)"
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    conversations = read_conversations(args.data, "bench_load")
    sizes: list[int] = args.sizes
    load_before = load_average()
    stores = [
        asyncio.run(run_sqlite(conversations, sizes, args.repeat)),
        *asyncio.run(run_postgres(args.postgres, conversations, sizes, args.repeat)),
    ]
    window_sizes = {size: len(window) for size, window in stores[0].windows.items()}
    peers = [
        run_peer(name, factory, conversations, sizes, args.repeat)
        for name, factory in (
            ("LangChain", langchain_peer),
            ("LlamaIndex", llama_index_peer),
            ("Agents SQLiteSession", partial(openai_agents_peer, window_sizes)),
            ("floor", floor_peer),
        )
    ]
    print_header(args.data, conversations, (args.postgres, stores[1]), load_before)
    print_report(sizes, stores, peers, args.repeat)
    if args.plot:
        progress(f"wrote {plot(sizes, stores, [run for run, _ in peers], args.plot)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
