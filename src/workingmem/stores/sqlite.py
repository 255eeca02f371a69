"""The embedded default store: one SQLite file in WAL mode.

    store = await SQLiteStore.open(".workingmem/memory.db")
    try:
        await store.append(tenant_id="t1", thread_id="th1", messages=[...])
    finally:
        await store.aclose()

Two connections, each with its own thread (`_sqlite_thread`): one writer, whose transactions
are `BEGIN IMMEDIATE` and serialized by a lock (so two coroutines never interleave inside one
transaction), and one reader, whose multi-statement reads run in one snapshot. WAL lets the
reader go on while the writer writes, and other processes share the file safely
(``busy_timeout`` waits for their locks). A statement is one trip to a connection's thread;
the window read, the hot path, is one trip for all its statements.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from ..errors import StoreError
from . import _rows
from ._dialect import UNCOUNTED_PAGE, Dialect, KnownAppend, Row, TailRead, TurnSearch
from ._sql_threads import (
    INSERT_THREAD,
    INSERT_TURN,
    INSERT_TURN_TOKENS,
    STATE_COLUMNS_OF_S,
    THREAD_COLUMNS_OF_TH,
)
from ._sqlite_thread import Connection
from .migrations import load_migrations
from .sql import SQLStore

__all__ = ["SQLiteStore"]

T = TypeVar("T")

_THREAD = (
    f"SELECT {THREAD_COLUMNS_OF_TH}, {STATE_COLUMNS_OF_S} FROM threads AS th "
    "LEFT JOIN memory_states AS s ON s.thread_pk = th.id "
    "WHERE th.tenant_id = ? AND th.thread_id = ?"
)
"""The thread's row and its memory state's (NULLs when it has none)."""
_OWN = (
    "SELECT seq, unit_seq, message, tokens FROM turns WHERE thread_pk = ? AND seq <= ? "
    "ORDER BY seq DESC"
)
"""The newest turns with the thread's own counts (its first tokenizer's)."""
_OTHER = (
    "SELECT t.seq, t.unit_seq, t.message, k.tokens FROM turns AS t LEFT JOIN turn_tokens AS k "
    "ON k.thread_pk = t.thread_pk AND k.tokenizer = ? AND k.seq = t.seq "
    "WHERE t.thread_pk = ? AND t.seq <= ? ORDER BY t.seq DESC"
)
"""The newest turns with another tokenizer's counts."""
_SEARCH = (
    "SELECT rowid - ? FROM turn_search WHERE turn_search MATCH ? AND rowid BETWEEN ? AND ? "
    "ORDER BY rank LIMIT ?"
)
"""A thread's turns by BM25: a turn's document is thread_pk * 2^32 + seq (migration 0010)."""
_DOCS_PER_THREAD = 2**32


def _read_tail(db: sqlite3.Connection, read: TailRead) -> tuple[Row, list[Row]] | None:
    """The thread row and its newest turns, in one snapshot, on the reader's thread: the turns
    are walked newest first and the walk stops where `read` is answered (`_walk`)."""
    _open(db, "BEGIN")  # the read lock is held
    try:
        thread = db.execute(_THREAD, (read.tenant_id, read.thread_id)).fetchone()
        if thread is None:
            return None
        pk, top = thread[0], thread[4]
        if read.before_seq is not None:
            top = min(top, read.before_seq - 1)
        if top < 1:
            return tuple(thread), []
        if _rows.first_tokenizer(thread[6]) == read.tokenizer_key:
            turns = db.execute(_OWN, (pk, top))
        else:
            turns = db.execute(_OTHER, (read.tokenizer_key, pk, top))
        try:
            return tuple(thread), _walk(turns, read)
        finally:
            turns.close()
    finally:
        db.execute("COMMIT")


def _walk(turns: Iterable[Row], read: TailRead) -> list[Row]:
    """The rows `read` asks for from (seq, unit_seq, message, tokens) rows, newest first: at most
    `limit`; with a token goal, through the first turn whose counts pass it and the rest of
    its unit (a window takes units whole). A turn not counted yet leaves the goal undecided:
    `UNCOUNTED_PAGE` rows more are read from there, for the caller to count."""
    rows: list[Row] = []
    covered, uncounted, head = 0, 0, None
    for row in turns:
        if head is not None and row[0] < head:
            break  # the unit is whole
        rows.append(row)
        if len(rows) >= read.limit:
            break
        if head is not None or read.tokens is None:
            continue
        if row[3] is None or uncounted:
            uncounted += 1
            if uncounted >= UNCOUNTED_PAGE:
                break
            continue
        covered += row[3]
        if covered > read.tokens:
            head = row[1]
            if row[0] == head:
                break
    return rows


Step = Callable[[sqlite3.Connection], object]


class _Session:
    """The statements of one transaction on one connection. What is queued (its BEGIN, the
    writes whose result nobody reads) travels with the next statement that is read, or with
    the COMMIT: an append is two trips to the connection's thread, not one per statement."""

    def __init__(self, db: Connection, begin: str) -> None:
        self._db = db
        self._pending: list[Step] = [lambda c: _open(c, begin)]
        self._committed = False

    async def _trip(self, last: Callable[[sqlite3.Connection], T]) -> T:
        pending, self._pending = self._pending, []

        def run(c: sqlite3.Connection) -> T:
            for step in pending:
                step(c)
            return last(c)

        return await self._db.call(run)

    async def rows(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        return await self._trip(lambda c: c.execute(sql, params).fetchall())

    async def row(self, sql: str, params: Sequence[object] = ()) -> Row | None:
        found = await self.rows(sql, params)
        return found[0] if found else None

    async def run(self, sql: str, params: Sequence[object] = ()) -> int:
        return await self._trip(lambda c: c.execute(sql, params).rowcount)

    async def queue(self, sql: str, params: Sequence[object] = ()) -> None:
        self._pending.append(lambda c: c.execute(sql, params))

    async def run_many(self, sql: str, params: Sequence[Sequence[object]]) -> None:
        self._pending.append(lambda c: c.executemany(sql, params))

    async def last(self, sql: str, params: Sequence[object] = ()) -> int:
        def run(c: sqlite3.Connection) -> int:
            changed = c.execute(sql, params).rowcount
            c.execute("COMMIT")
            return changed

        changed = await self._trip(run)
        self._committed = True
        return changed

    async def commit(self) -> None:
        if not self._committed:
            await self._trip(lambda c: c.execute("COMMIT"))

    def end_soon(self) -> None:
        """Ends a read: its COMMIT is queued on the connection, not waited for (every later
        call runs after it); nothing at all when the read ran no statement."""
        if not self._pending:
            self._db.submit(lambda c: c.execute("COMMIT"))


def _open(db: sqlite3.Connection, begin: str) -> None:
    """Begins a transaction on a connection whose lock is held, ending first one that a
    cancelled holder left open.

    The connection runs calls in order, in its thread, each to its end even when the task
    awaiting it is cancelled (a client that went away; under AnyIO the cancellation comes
    again at every await, so nothing can be waited for after it). A call is queued the moment
    it is made, so whatever an earlier holder queued (its statements, its COMMIT, its ROLLBACK)
    has run when this runs; a transaction still open here is such a leftover.
    """
    if db.in_transaction:
        db.execute("ROLLBACK")
    db.execute(begin)


_BUSY = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


_MOVE_ON = (
    "UPDATE threads SET turn_count = turn_count + ?, last_unit_seq = turn_count + ?, "
    "updated_at = ? WHERE tenant_id = ? AND thread_id = ? AND turn_count = ? AND tokenizers = ? "
    "RETURNING id, turn_count - ?"
)


def _append_known(db: sqlite3.Connection, write: KnownAppend) -> int | None:
    """`SQLiteDialect.append_known` in the writer's thread: one trip, one transaction."""
    _open(db, "BEGIN IMMEDIATE")
    if write.create:
        db.execute(
            INSERT_THREAD,
            (write.tenant_id, write.thread_id, write.user_id, write.stamp, write.stamp),
        )
    count = len(write.turns)
    found = db.execute(
        _MOVE_ON,
        (
            count,
            write.turns[-1][1],
            write.stamp,
            write.tenant_id,
            write.thread_id,
            write.turn_count,
            write.tokenizers,
            count,
        ),
    ).fetchone()
    if found is None:
        db.execute("ROLLBACK")
        return None
    pk, base = found
    db.executemany(
        INSERT_TURN,
        [
            (pk, base + seq, base + unit, role, write.user_id, message, write.stamp, fmt, item, n)
            for seq, unit, role, message, fmt, item, n in write.turns
        ],
    )
    db.executemany(INSERT_TURN_TOKENS, [(pk, key, base + seq, n) for key, seq, n in write.others])
    db.execute("COMMIT")
    return int(base)


def _rollback(db: sqlite3.Connection) -> None:
    if db.in_transaction:
        db.execute("ROLLBACK")


class SQLiteDialect(Dialect):
    """SQLite's side of `SQLStore`: one writer, one reader, ISO timestamps."""

    name = "sqlite"
    lock = ""  # BEGIN IMMEDIATE serializes writers, across processes too

    def __init__(self, writer: Connection, reader: Connection, path: str | None = None) -> None:
        self._writer = writer
        self._reader = reader
        self._write_lock = asyncio.Lock()
        self._read_lock = self._write_lock if reader is writer else asyncio.Lock()
        self._path = path
        self._inline: sqlite3.Connection | None = None
        self._inline_thread: int | None = None

    @asynccontextmanager
    async def _writing(self) -> AsyncIterator[None]:
        """The writer's connection, this task's until the block ends; a transaction the block
        leaves open (it failed, or was cancelled) is rolled back."""
        async with self._write_lock:
            try:
                yield
            except sqlite3.Error as exc:
                self._writer.submit(_rollback)
                raise StoreError(f"SQLite failed: {exc}") from exc
            except BaseException:
                self._writer.submit(_rollback)  # queued at once, run even if this task is cancelled
                raise

    @asynccontextmanager
    async def write(self) -> AsyncIterator[_Session]:
        async with self._writing():
            session = _Session(self._writer, "BEGIN IMMEDIATE")
            yield session
            await session.commit()

    @asynccontextmanager
    async def read(self) -> AsyncIterator[_Session]:
        async with self._read_lock:
            session = _Session(self._reader, "BEGIN")
            try:
                yield session
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite failed: {exc}") from exc
            finally:
                session.end_soon()

    def snapshot(self) -> AbstractAsyncContextManager[_Session]:
        return self.read()  # a read transaction on the WAL reader is one snapshot already

    def stamp(self, moment: datetime) -> object:
        return moment.isoformat()

    def moment(self, value: Any) -> datetime:
        return datetime.fromisoformat(value)

    async def read_tail(self, read: TailRead) -> tuple[Row, list[Row]] | None:
        inline = self._inline_reader()
        if inline is not None:
            # On the loop's own thread: a WAL reader takes no lock a writer holds, and the
            # read is less work than the trip to a thread would be. Should it ever be told to
            # wait (busy), the reader's thread does the waiting instead.
            try:
                return _read_tail(inline, read)
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode & 0xFF not in _BUSY:  # the primary code
                    raise StoreError(f"SQLite failed: {exc}") from exc
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite failed: {exc}") from exc
        async with self._read_lock:
            try:
                return await self._reader.call(lambda db: _read_tail(db, read))
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite failed: {exc}") from exc

    def _inline_reader(self) -> sqlite3.Connection | None:
        """A read-only connection of the thread that first read a window (the store's loop),
        opened then; None on another thread, or for a database in memory (one connection)."""
        if self._path is None:
            return None
        if self._inline is None:
            db = sqlite3.connect(self._path, isolation_level=None)
            db.execute("PRAGMA query_only = ON")
            db.execute("PRAGMA busy_timeout = 0")  # never waits on the loop
            self._inline, self._inline_thread = db, threading.get_ident()
        return self._inline if self._inline_thread == threading.get_ident() else None

    def search(self, search: TurnSearch) -> tuple[str, Sequence[object]]:
        base = search.thread_pk * _DOCS_PER_THREAD
        match = " OR ".join(f'"{term}"' for term in search.terms)  # words: no quote inside
        return _SEARCH, (base, match, base + 1, base + search.before_seq - 1, search.limit)

    async def append_known(self, write: KnownAppend) -> int | None:
        async with self._writing():
            return await self._writer.call(lambda db: _append_known(db, write))

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
        if self._inline is not None:
            self._inline.close()
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
            writer = await Connection.open(target)
            reader = writer if target == ":memory:" else await Connection.open(target)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open the SQLite database {target!r}: {exc}") from exc
        dialect = SQLiteDialect(writer, reader, None if target == ":memory:" else target)
        try:
            await dialect.migrate()
        except BaseException:
            await dialect.aclose()
            raise
        return cls(dialect)
