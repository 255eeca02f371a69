"""Each turn's running count (migration 12 on SQLite, 13 on PostgreSQL): the sum of its thread's
own counts through it, NULL while any of those turns is not counted, and the thread's, through
its newest turn. Every way a thread's turns change keeps them true, and a read for a token goal
(which PostgreSQL answers from them) takes the turns a walk over the counts would take."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

import workingmem as wm
from tests.conftest import two_stores
from tests.helpers import assistant, tool, user
from tests.stores.test_migrations import _database_at, _Stored
from workingmem.stores import _sql_reads
from workingmem.stores.sql import SQLStore

TOKENIZER = wm.tokenizer_for(wm.ModelInfo(id="gpt-4o", context_window=128_000))


async def _running(
    store: wm.Store, tenant: str, thread_id: str
) -> tuple[list[tuple[int, ...]], int]:
    """The thread's turns as (seq, tokens, tokens_through) and the thread's running count."""
    assert isinstance(store, SQLStore)
    async with store._dialect.read() as session:
        thread = await session.row(
            "SELECT id, tokens_through FROM threads WHERE tenant_id = ? AND thread_id = ?",
            (tenant, thread_id),
        )
        assert thread is not None
        rows = await session.rows(
            "SELECT seq, tokens, tokens_through FROM turns WHERE thread_pk = ? ORDER BY seq",
            (thread[0],),
        )
    return [tuple(row) for row in rows], thread[1]


async def _assert_summed(store: wm.Store, tenant: str, thread_id: str) -> list[tuple[int, ...]]:
    """Asserts each turn's running count is its thread's counts summed through it (None from
    the first turn not counted on) and the thread's is its newest turn's; the rows."""
    rows, through = await _running(store, tenant, thread_id)
    total: int | None = 0
    for seq, tokens, running in rows:
        total = None if total is None or tokens is None else total + tokens
        assert running == total, f"turn {seq}: running count {running}, summed {total}"
    assert through == total, f"thread: running count {through}, summed {total}"
    return rows


async def _count(store: wm.Store, tenant: str, thread_id: str) -> None:
    """A read of the whole thread with the model's tokenizer: counts and registers it."""
    await store.read_tail(tenant_id=tenant, thread_id=thread_id, tokenizer=TOKENIZER, limit=1000)


async def test_appends_edits_and_forks_keep_the_running_counts(
    store: wm.Store, tenant: str
) -> None:
    await store.append(
        tenant_id=tenant, thread_id="th", messages=[user("hello"), assistant("hi there")]
    )
    await _count(store, tenant, "th")  # registers the tokenizer: appends count from here on
    assert [r[2] for r in await _assert_summed(store, tenant, "th")] != [None, None]
    await store.append(
        tenant_id=tenant, thread_id="th", messages=[user("weather in Lyon?"), assistant(None, "c1")]
    )
    await store.append(
        tenant_id=tenant, thread_id="th", messages=[tool("c1", "rainy, 14 C")]
    )  # joins the open unit
    await store.append(
        tenant_id=tenant, thread_id="th", messages=[assistant("It is rainy."), user("and in May?")]
    )
    await _assert_summed(store, tenant, "th")

    await store.pop_turns(tenant_id=tenant, thread_id="th")
    await _assert_summed(store, tenant, "th")
    await store.append(
        tenant_id=tenant, thread_id="th", messages=[user("and in June?")], after_seq=4
    )
    await _assert_summed(store, tenant, "th")
    edited = [user("hello"), assistant("hi there"), user("weather in Paris?"), assistant("sunny")]
    await store.replace_turns(tenant_id=tenant, thread_id="th", messages=edited)
    rows = await _assert_summed(store, tenant, "th")
    assert len(rows) == 4
    assert rows[-1][2] is not None

    await store.fork_thread(tenant_id=tenant, source_id="th", thread_id="fork", through_seq=3)
    forked = await _assert_summed(store, tenant, "fork")
    assert forked == rows[:3]
    await store.append(tenant_id=tenant, thread_id="fork", messages=[assistant("cloudy")])
    await _assert_summed(store, tenant, "fork")


async def test_counts_made_later_are_summed_when_every_turn_before_them_is(
    store: wm.Store, tenant: str
) -> None:
    history = [user(f"question {i}") if i % 2 == 0 else assistant(f"answer {i}") for i in range(12)]
    await store.append(
        tenant_id=tenant, thread_id="th", messages=history
    )  # no tokenizer yet: nothing counted
    assert {r[2] for r in await _assert_summed(store, tenant, "th")} == {None}

    await store.read_tail(
        tenant_id=tenant, thread_id="th", tokenizer=TOKENIZER, limit=4
    )  # counts the newest 4 only
    rows = await _assert_summed(store, tenant, "th")
    assert [r[1] is not None for r in rows] == [False] * 8 + [True] * 4
    assert {r[2] for r in rows} == {None}, "the oldest turns are not counted"
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("one more")])
    await _assert_summed(store, tenant, "th")

    await _count(store, tenant, "th")  # the older turns counted: the whole thread sums on
    rows = await _assert_summed(store, tenant, "th")
    assert None not in {r[2] for r in rows}
    await store.append(tenant_id=tenant, thread_id="th", messages=[assistant("and its answer")])
    assert None not in {r[2] for r in await _assert_summed(store, tenant, "th")}


def _walked(turns: list[wm.CountedTurn], goal: int) -> list[int]:
    """The seqs a read for `goal` tokens takes, walking the counts newest first: from the head
    of the unit of the turn whose count passes the goal (every turn when none does)."""
    newer = 0
    for turn in reversed(turns):
        if newer + turn.tokens > goal:
            return [t.seq for t in turns if t.seq >= turn.unit_seq]
        newer += turn.tokens
    return [t.seq for t in turns]


async def test_a_read_for_a_token_goal_takes_the_turns_the_counts_say(
    store: wm.Store, tenant: str
) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("start")])
    await _count(store, tenant, "th")
    for i in range(15):
        await store.append(
            tenant_id=tenant, thread_id="th", messages=[user(f"question {i} " + "word " * (i % 5))]
        )
        await store.append(
            tenant_id=tenant,
            thread_id="th",
            messages=[assistant(None, f"c{i}"), tool(f"c{i}", "x " * i)],
        )
        await store.append(tenant_id=tenant, thread_id="th", messages=[assistant(f"answer {i}")])
    whole = (
        await store.read_tail(tenant_id=tenant, thread_id="th", tokenizer=TOKENIZER, limit=1000)
    ).turns
    total = sum(t.tokens for t in whole)
    running = 0
    boundaries = []
    for turn in reversed(whole):
        running += turn.tokens
        boundaries.append(running)
    goals = sorted({0, 1, total - 1, total, total + 50, *boundaries, *(b - 1 for b in boundaries)})
    for goal in goals:
        read = await store.read_tail(
            tenant_id=tenant, thread_id="th", tokenizer=TOKENIZER, limit=1000, tokens=goal
        )
        assert [t.seq for t in read.turns] == _walked(whole, goal), f"goal {goal}"
    before = await store.read_tail(
        tenant_id=tenant, thread_id="th", tokenizer=TOKENIZER, limit=1000, before_seq=20, tokens=60
    )
    assert [t.seq for t in before.turns] == _walked([t for t in whole if t.seq < 20], 60)


async def test_migration_sums_the_counts_stored_before_it(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    _database_at(path, 11)
    stamp = "2026-01-01T00:00:00+00:00"
    counts: dict[str, list[int | None]] = {"counted": [7, 9, 11], "gap": [7, None, 11], "empty": []}
    with sqlite3.connect(path, isolation_level=None) as db:
        for pk, (thread_id, tokens) in enumerate(counts.items(), start=1):
            db.execute(
                "INSERT INTO threads (id, tenant_id, thread_id, turn_count, last_unit_seq, "
                "tokenizers, created_at, updated_at) VALUES (?, 't', ?, ?, ?, ?, ?, ?)",
                (
                    pk,
                    thread_id,
                    len(tokens),
                    len(tokens),
                    json.dumps([TOKENIZER.key]),
                    stamp,
                    stamp,
                ),
            )
            for seq, n in enumerate(tokens, start=1):
                db.execute(
                    "INSERT INTO turns (thread_pk, seq, unit_seq, role, message, created_at, "
                    "tokens) VALUES (?, ?, ?, 'user', ?, ?, ?)",
                    (
                        pk,
                        seq,
                        seq,
                        json.dumps({"role": "user", "content": f"turn {seq}"}),
                        stamp,
                        n,
                    ),
                )
    async with await wm.open_store(str(path)) as store:
        assert [r[2] for r in await _assert_summed(store, "t", "counted")] == [7, 16, 27]
        assert [r[2] for r in await _assert_summed(store, "t", "gap")] == [7, None, None]
        assert await _assert_summed(store, "t", "empty") == []


@pytest.mark.parametrize("count", [1, 100])
async def test_an_append_in_one_trip_sums_on_from_the_thread(
    store: wm.Store, tenant: str, count: int
) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("first")])
    await _count(store, tenant, "th")
    batch = [user(f"q{i}") if i % 2 == 0 else assistant(f"a{i}") for i in range(count)]
    await store.append(tenant_id=tenant, thread_id="th", messages=batch)
    rows = await _assert_summed(store, tenant, "th")
    assert len(rows) == count + 1
    assert rows[-1][2] is not None


async def test_counts_a_read_made_are_stored_for_each_tokenizer(
    store: wm.Store, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sql_reads, "_VALUES_ROWS", 7)  # a read's counts in several statements
    other = wm.tokenizer_for(wm.ModelInfo(id="gpt-4", context_window=8_192))
    assert other.key != TOKENIZER.key
    history = [
        user(f"question {i}") if i % 2 == 0 else assistant(f"answer {i} " * i) for i in range(40)
    ]
    await store.append(tenant_id=tenant, thread_id="th", messages=history)
    for tokenizer in (TOKENIZER, other):  # the first registered keeps its counts in the turns
        counted = await store.read_tail(
            tenant_id=tenant, thread_id="th", tokenizer=tokenizer, limit=1000
        )
        assert [t.tokens for t in counted.turns] == [tokenizer.count_message(m) for m in history]
        stored = await store.read_tail(
            tenant_id=tenant, thread_id="th", tokenizer=_Stored(tokenizer.key), limit=1000
        )
        assert [t.tokens for t in stored.turns] == [t.tokens for t in counted.turns]
    assert None not in {r[2] for r in await _assert_summed(store, tenant, "th")}


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_writers_appending_at_once_sum_every_turn_once(
    backend: str, tmp_path: Path, tenant: str
) -> None:
    """Two workers that know the thread append at once (each append in one trip, or the
    ordinary way when the other moved the thread first): the sums are the thread's counts."""
    async with two_stores(backend, tmp_path) as (first, second):
        await first.append(tenant_id=tenant, thread_id="th", messages=[user("start")])
        for worker in (first, second):
            await _count(worker, tenant, "th")
        await asyncio.gather(
            *(
                (first if i % 2 else second).append(
                    tenant_id=tenant, thread_id="th", messages=[user(f"q{i}"), assistant(f"a{i}")]
                )
                for i in range(10)
            )
        )
        await first.append(
            tenant_id=tenant, thread_id="th", messages=[user("look"), assistant(None, "c1")]
        )
        await second.append(tenant_id=tenant, thread_id="th", messages=[tool("c1")])
        rows = await _assert_summed(first, tenant, "th")
    assert len(rows) == 24
    assert rows[-1][2] is not None
