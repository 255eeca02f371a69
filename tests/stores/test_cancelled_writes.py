"""A write cancelled mid-transaction (a client that went away) never wedges the store. The
SQLite driver finishes a statement in its thread even when the task awaiting it is
cancelled, so a BEGIN can land after its task let the connection go; the next writer (and
reader) meets that leftover transaction in order and ends it, instead of failing with "cannot
start a transaction within a transaction" on every write after it. PostgreSQL's pool takes a
connection back in whatever state a cancelled task left it: the same tests run there."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anyio
import pytest

import workingmem as wm
from tests.conftest import postgres_url
from workingmem.stores._dialect import KnownAppend
from workingmem.stores.sqlite import SQLiteDialect

HI = [{"role": "user", "content": "x"}]
LATE = {"role": "user", "content": "late"}
GPT_4O = wm.tokenizer_for(wm.ModelInfo(id="gpt-4o", context_window=1000))


async def test_a_transaction_a_cancelled_writer_left_open_is_ended(tmp_path: Path) -> None:
    async with await wm.open_store(f"sqlite:///{tmp_path / 'memory.db'}") as store:
        assert isinstance(store, wm.SQLStore)
        dialect = store._dialect
        assert isinstance(dialect, SQLiteDialect)
        await store.append(
            tenant_id="t", thread_id="th", messages=[{"role": "user", "content": "a"}]
        )
        # what a writer cancelled between its BEGIN and its COMMIT leaves behind
        await dialect._writer.call(lambda db: db.execute("BEGIN IMMEDIATE"))
        await dialect._writer.call(lambda db: db.execute("DELETE FROM turns"))
        await dialect._reader.call(lambda db: db.execute("BEGIN"))
        await store.append(
            tenant_id="t", thread_id="th", messages=[{"role": "user", "content": "b"}]
        )
        turns = await store.list_turns(tenant_id="t", thread_id="th")
        assert [t.content for t in turns] == ["a", "b"]  # the leftover's delete rolled back


async def test_writes_cancelled_at_every_step_leave_the_store_working(
    store: wm.Store, tenant: str
) -> None:
    for steps in range(40):  # cancel after 0, 1, 2, ... turns of the event loop
        task = asyncio.create_task(store.append(tenant_id=tenant, thread_id="th", messages=HI))
        for _ in range(steps):
            await asyncio.sleep(0)  # one turn of the loop: an order, not a wait
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    stored = await store.append(tenant_id=tenant, thread_id="th", messages=HI)
    assert stored[0].content == "x"


async def test_writes_cancelled_by_an_anyio_scope_leave_the_store_working(
    store: wm.Store, tenant: str
) -> None:
    """Starlette cancels a request's work through AnyIO, whose cancellation comes again at
    every await: a write cannot wait for its last statement after it, so the next one must
    meet whatever it left in order."""
    await store.append(tenant_id=tenant, thread_id="th", messages=HI)
    for steps in range(40):
        scope = anyio.CancelScope()

        async def write(scope: anyio.CancelScope = scope) -> None:
            with scope:
                await store.append(tenant_id=tenant, thread_id="th", messages=HI)
                await store.append(tenant_id=tenant, thread_id="th", messages=HI)

        async with anyio.create_task_group() as group:
            group.start_soon(write)
            for _ in range(steps):
                await asyncio.sleep(0)
            scope.cancel()
    # A cancelled write's COMMIT or ROLLBACK may still be on its way: the next write is queued
    # behind it on the writer's connection, so read after one.
    stored = await store.append(tenant_id=tenant, thread_id="th", messages=HI)
    turns = await store.list_turns(tenant_id=tenant, thread_id="th", limit=100)
    assert [t.seq for t in turns] == list(range(1, len(turns) + 1))
    assert stored[0].seq == len(turns)  # every append before was whole, or not at all
    for _ in range(12):  # every pooled connection reads what is there (none left half-done)
        thread = await store.get_thread(tenant_id=tenant, thread_id="th")
        assert thread.turn_count == len(turns)
        assert (await store.get_memory_state(tenant_id=tenant, thread_id="th")).version == 0


async def test_a_write_cancelled_as_its_pipeline_opens_leaves_no_connection_behind(
    monkeypatch: pytest.MonkeyPatch, tenant: str
) -> None:
    """psycopg can be cancelled inside its pipeline's entry, after the connection went into
    pipeline mode and before the block could leave it: a connection handed back like that
    answers every later read of the pool with nothing (a thread, a key "not found"). The store
    ends such a connection instead. The cancellation is placed there by a hook on the entry
    and psycopg's own yield after it (`MAX_BUSY_TIME` 0: it yields after every step)."""
    import psycopg
    import psycopg.waiting

    async with await wm.open_store(postgres_url()) as store:
        await store.append(tenant_id=tenant, thread_id="th", messages=HI)
        entered = asyncio.Event()
        enter = psycopg.AsyncPipeline._enter_gen

        def entering(self: psycopg.AsyncPipeline) -> Any:
            yield from enter(self)
            entered.set()  # the next await is psycopg's yield: the cancellation lands there

        monkeypatch.setattr(psycopg.AsyncPipeline, "_enter_gen", entering)
        monkeypatch.setattr(psycopg.waiting, "MAX_BUSY_TIME", 0.0)
        for _ in range(3):
            entered.clear()
            # after_seq: a replace is written in a pipeline (an append that opens a unit on a
            # thread the store knows is one statement, without one)
            task = asyncio.create_task(
                store.append(tenant_id=tenant, thread_id="th", messages=HI, after_seq=1)
            )
            await entered.wait()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        monkeypatch.undo()
        for _ in range(12):  # every pooled connection reads what is there
            thread = await store.get_thread(tenant_id=tenant, thread_id="th")
            assert thread.turn_count == 1


async def test_an_append_that_reaches_the_database_after_a_later_write_writes_nothing(
    store: wm.Store, tenant: str
) -> None:
    """An append to a thread the store has read is one statement (PostgreSQL) or one call
    (SQLite); once sent, a cancelled one still runs, whenever the database gets to it. Sent
    late (after another write), it must not land out of order: it expects the turn count it
    saw, which is gone. The late arrival is placed by holding the write back."""
    assert isinstance(store, wm.SQLStore)
    dialect = store._dialect
    await store.append(tenant_id=tenant, thread_id="th", messages=HI)
    await store.read_tail(tenant_id=tenant, thread_id="th", tokenizer=GPT_4O, limit=10)
    held: list[KnownAppend] = []
    send = dialect.append_known

    async def cancelled_before_the_server_runs_it(write: KnownAppend) -> int | None:
        held.append(write)
        raise asyncio.CancelledError

    dialect.append_known = cancelled_before_the_server_runs_it  # type: ignore[method-assign]
    with pytest.raises(asyncio.CancelledError):
        await store.append(tenant_id=tenant, thread_id="th", messages=[LATE])
    dialect.append_known = send  # type: ignore[method-assign]
    await store.append(tenant_id=tenant, thread_id="th", messages=HI)  # the later write
    assert await send(held[0]) is None  # arrives now
    turns = await store.list_turns(tenant_id=tenant, thread_id="th")
    assert [t.content for t in turns] == ["x", "x"]
    assert (await store.get_thread(tenant_id=tenant, thread_id="th")).turn_count == 2
