"""The embedded default store: one SQLite file in WAL mode, through aiosqlite.

    store = await SQLiteStore.open(".workingmem/memory.db")
    try:
        await store.append(tenant_id="t1", thread_id="th1", messages=[...])
    finally:
        await store.aclose()

Two connections: one writer, whose transactions are `BEGIN IMMEDIATE` and serialized by a
lock (so two coroutines never interleave inside one transaction), and one reader, whose
multi-statement reads run in one snapshot. WAL lets the reader go on while the writer writes,
and other processes share the file safely (``busy_timeout`` waits for their locks). Every
statement is one trip to aiosqlite's thread (``execute_fetchall``).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import aiosqlite

from ..errors import StoreError
from . import _rows
from ._dialect import Dialect, Row
from ._sql_threads import THREAD_COLUMNS
from .migrations import load_migrations
from .sql import SQLStore

__all__ = ["SQLiteStore"]

_TAIL = (
    f"SELECT {', '.join('th.' + c.strip() for c in THREAD_COLUMNS.split(','))}, "
    "t.seq, t.unit_seq, t.message, "
    "(SELECT k.tokens FROM turn_tokens AS k WHERE k.thread_pk = th.id "
    "AND k.tokenizer = ? AND k.seq = t.seq) "
    "FROM threads AS th LEFT JOIN turns AS t ON t.thread_pk = th.id "
    "AND t.seq < coalesce(?, th.turn_count + 1) "
    "WHERE th.tenant_id = ? AND th.thread_id = ? ORDER BY t.seq DESC LIMIT ?"
)
"""The thread row joined to its newest turns: one statement is its own snapshot."""


class _Session:
    """Statements on one aiosqlite connection, each one trip to its thread."""

    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db

    async def rows(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        return [tuple(row) for row in await self._db.execute_fetchall(sql, params)]

    async def row(self, sql: str, params: Sequence[object] = ()) -> Row | None:
        found = await self.rows(sql, params)
        return found[0] if found else None

    async def run(self, sql: str, params: Sequence[object] = ()) -> int:
        cursor = await self._db.execute(sql, params)
        return cursor.rowcount

    async def run_many(self, sql: str, params: Sequence[Sequence[object]]) -> None:
        await self._db.executemany(sql, params)


async def _begin(db: aiosqlite.Connection, begin: str) -> None:
    """Begins a transaction on a connection whose lock is held, ending first one that a
    cancelled holder left open.

    The driver runs statements in order, in its thread, each to its end even when the task
    awaiting it is cancelled (a client that went away; under AnyIO the cancellation comes
    again at every await, so nothing can be waited for after it). A statement is queued the
    moment it is awaited, so whatever an earlier holder queued (its BEGIN, its COMMIT, its
    ROLLBACK) runs before this BEGIN; if this BEGIN then meets a transaction, it is such a
    leftover, and its end is queued right behind it. Nothing else is checked in advance: an
    earlier holder's COMMIT may still be on its way.
    """
    try:
        await db.execute(begin)
    except sqlite3.OperationalError:
        if not db.in_transaction:
            raise
        await db.execute("ROLLBACK")
        await db.execute(begin)


class SQLiteDialect(Dialect):
    """SQLite's side of `SQLStore`: one writer, one reader, ISO timestamps."""

    name = "sqlite"
    lock = ""  # BEGIN IMMEDIATE serializes writers, across processes too

    def __init__(self, writer: aiosqlite.Connection, reader: aiosqlite.Connection) -> None:
        self._writer = writer
        self._reader = reader
        self._write_lock = asyncio.Lock()
        self._read_lock = self._write_lock if reader is writer else asyncio.Lock()

    @asynccontextmanager
    async def write(self) -> AsyncIterator[_Session]:
        async with self._write_lock:
            db = self._writer
            try:
                await _begin(db, "BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite could not begin a write: {exc}") from exc
            try:
                yield _Session(db)
            except sqlite3.Error as exc:
                await db.execute("ROLLBACK")
                raise StoreError(f"SQLite failed: {exc}") from exc
            except BaseException:
                await db.execute("ROLLBACK")  # queued at once, run even if this task is cancelled
                raise
            try:
                await db.execute("COMMIT")
            except sqlite3.Error as exc:
                await db.execute("ROLLBACK")
                raise StoreError(f"SQLite could not commit: {exc}") from exc

    @asynccontextmanager
    async def read(self) -> AsyncIterator[_Session]:
        async with self._read_lock:
            db = self._reader
            await _begin(db, "BEGIN")
            try:
                yield _Session(db)
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite failed: {exc}") from exc
            finally:
                await db.execute("COMMIT")

    def snapshot(self) -> AbstractAsyncContextManager[_Session]:
        return self.read()  # a read transaction on the WAL reader is one snapshot already

    def stamp(self, moment: datetime) -> object:
        return moment.isoformat()

    def moment(self, value: Any) -> datetime:
        return datetime.fromisoformat(value)

    async def read_tail(
        self,
        tokenizer_key: str,
        before_seq: int | None,
        tenant_id: str,
        thread_id: str,
        limit: int,
    ) -> list[Row]:
        async with self._read_lock:
            try:
                rows = await self._reader.execute_fetchall(
                    _TAIL, (tokenizer_key, before_seq, tenant_id, thread_id, limit)
                )
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite failed: {exc}") from exc
        return [tuple(row) for row in rows]

    async def migrate(self) -> None:
        async with self.write() as session:
            await session.run(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
            )
            done = {row[0] for row in await session.rows("SELECT version FROM schema_migrations")}
        for migration in load_migrations("sqlite"):
            if migration.version in done:
                continue
            async with self.write() as session:
                if await session.row(
                    "SELECT 1 FROM schema_migrations WHERE version = ?", (migration.version,)
                ):
                    continue  # another process applied it meanwhile
                for statement in migration.statements:
                    await session.run(statement)
                await session.run(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                    (migration.version, migration.name, self.stamp(_rows.utcnow())),
                )

    async def aclose(self) -> None:
        await self._writer.close()
        if self._reader is not self._writer:
            await self._reader.close()


class SQLiteStore(SQLStore):
    """The `SQLStore` on one SQLite file (or ``:memory:``)."""

    @classmethod
    async def open(cls, path: str | Path) -> SQLiteStore:
        """Opens (creating it and its folder if needed) and migrates the database file."""
        target = str(path)
        try:
            if target != ":memory:":
                Path(target).parent.mkdir(parents=True, exist_ok=True)
            writer = await _connect(target)
            reader = writer if target == ":memory:" else await _connect(target)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open the SQLite database {target!r}: {exc}") from exc
        dialect = SQLiteDialect(writer, reader)
        try:
            await dialect.migrate()
        except BaseException:
            await dialect.aclose()
            raise
        return cls(dialect)


async def _connect(path: str) -> aiosqlite.Connection:
    db = await aiosqlite.connect(path, isolation_level=None)
    await db.execute("PRAGMA journal_mode = WAL")
    await db.execute("PRAGMA synchronous = NORMAL")
    await db.execute("PRAGMA foreign_keys = ON")
    await db.execute("PRAGMA busy_timeout = 10000")
    return db
