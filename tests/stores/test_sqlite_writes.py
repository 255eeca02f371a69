"""SQLite writes on the store's own loop thread: no trip to a thread when nothing is queued
there, the writer's thread when another process holds the lock or when earlier work is still
queued, and the WAL checkpointed off the loop."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import workingmem as wm
from tests.helpers import assistant, user
from workingmem.stores import sqlite as sqlite_store
from workingmem.stores._sqlite_thread import Connection

GPT_4O = wm.tokenizer_for(wm.ModelInfo(id="gpt-4o", context_window=1000))


def _trips(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The threads each trip handed to a connection's thread ran on."""
    ran: list[int] = []
    call = Connection.call

    async def recorded(self: Connection, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        def run(db: sqlite3.Connection) -> Any:
            ran.append(threading.get_ident())
            return fn(db)

        return await call(self, run)

    monkeypatch.setattr(Connection, "call", recorded)
    return ran


def _wal_bytes(path: Path) -> int:
    return os.path.getsize(f"{path}-wal")


async def _contents(store: wm.ThreadStore) -> list[str]:
    return [str(t.content) for t in await store.list_turns(tenant_id="t", thread_id="th")]


async def test_a_write_with_nothing_queued_makes_no_trip_to_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await wm.open_store(str(tmp_path / "memory.db")) as store:
        trips = _trips(monkeypatch)
        await store.append(tenant_id="t", thread_id="th", messages=[user("q")])
        await store.read_tail(tenant_id="t", thread_id="th", tokenizer=GPT_4O, limit=10)
        await store.append(tenant_id="t", thread_id="th", messages=[assistant("a")])
        assert await store.claim_thread(tenant_id="t", thread_id="th", owner="o", ttl_seconds=5)
        await store.release_thread(tenant_id="t", thread_id="th", owner="o")
        assert await _contents(store) == ["q", "a"]
        assert trips == []


async def test_a_write_another_process_holds_the_lock_for_waits_on_the_writers_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "memory.db"
    async with await wm.open_store(str(path)) as store:
        await store.append(tenant_id="t", thread_id="th", messages=[user("q")])
        trips = _trips(monkeypatch)
        handed = asyncio.Event()
        call = Connection.call

        async def handing(self: Connection, fn: Callable[[sqlite3.Connection], Any]) -> Any:
            handed.set()
            return await call(self, fn)

        monkeypatch.setattr(Connection, "call", handing)
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # another process writes
            write = asyncio.create_task(
                store.append(tenant_id="t", thread_id="th", messages=[assistant("a")])
            )
            await handed.wait()  # told to wait on the loop: the thread waits instead
            assert not write.done()
            other.execute("COMMIT")
            await write
        finally:
            other.close()
        assert await _contents(store) == ["q", "a"]
        assert trips
        assert all(ran != threading.get_ident() for ran in trips)


async def test_a_write_goes_behind_what_is_still_queued_on_the_writers_thread(
    tmp_path: Path,
) -> None:
    async with await wm.open_store(str(tmp_path / "memory.db")) as store:
        assert isinstance(store, wm.SQLStore)
        dialect = store._dialect
        assert isinstance(dialect, sqlite_store.SQLiteDialect)
        await store.append(tenant_id="t", thread_id="th", messages=[user("q")])
        release = threading.Event()
        dialect._writer.submit(lambda db: release.wait(10))  # earlier work, still queued
        write = asyncio.create_task(
            store.append(tenant_id="t", thread_id="th", messages=[assistant("a")])
        )
        await asyncio.sleep(0)  # one turn of the loop: the write has been handed over
        assert not write.done()  # behind the earlier work, not on the loop
        release.set()
        await write
        assert await _contents(store) == ["q", "a"]


async def test_the_loops_writes_are_checkpointed_by_the_writers_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loop's writer leaves checkpoints (which sync the file) to the writer's thread; the
    WAL stays as short as SQLite's own checkpoints would keep it."""
    sizes: dict[int, int] = {}
    for every in (10**9, sqlite_store.CHECKPOINT_CHANGES):
        monkeypatch.setattr(sqlite_store, "CHECKPOINT_CHANGES", every)
        path = tmp_path / f"memory-{every}.db"
        async with await wm.open_store(str(path)) as store:
            for n in range(1_000):
                await store.append(tenant_id="t", thread_id="th", messages=[user(f"q{n}")])
            sizes[every] = _wal_bytes(path)
    assert sizes[sqlite_store.CHECKPOINT_CHANGES] < sizes[10**9] / 2, sizes
