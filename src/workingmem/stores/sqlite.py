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
(``busy_timeout`` waits for their locks). A session's statements travel to its connection's
thread together, a trip for several; and where no trip is needed at all (nothing queued on
the thread, no other process holding the lock) a session runs on the loop's own connections
instead (`SQLiteDialect`).
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
from ..types import CHAT_ORIGINAL_KEY
from . import _rows
from ._dialect import UNCOUNTED_PAGE, Dialect, KnownAppend, Row, TailRead, TurnSearch
from ._leases import RELEASE_THREAD
from ._sql_reads import STATE_COLUMNS_OF_S, THREAD_COLUMNS_OF_TH, tail_columns
from ._sql_threads import INSERT_THREAD, INSERT_TURN, INSERT_TURN_TOKENS
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
    "SELECT seq, unit_seq, "
    + tail_columns("", "tokens", f"json_extract(item, '$.{CHAT_ORIGINAL_KEY}')")
    + " FROM turns WHERE thread_pk = ? AND seq <= ? ORDER BY seq DESC"
)
"""The newest turns with the thread's own counts (its first tokenizer's)."""
_OTHER = (
    "SELECT t.seq, t.unit_seq, "
    + tail_columns("t.", "k.tokens", f"json_extract(t.item, '$.{CHAT_ORIGINAL_KEY}')")
    + " FROM turns AS t LEFT JOIN turn_tokens AS k ON k.thread_pk = t.thread_pk "
    "AND k.tokenizer = ? AND k.seq = t.seq WHERE t.thread_pk = ? AND t.seq <= ? "
    "ORDER BY t.seq DESC"
)
"""The newest turns with another tokenizer's counts."""
_SEARCH = (
    "SELECT rowid - ? FROM turn_search WHERE turn_search MATCH ? AND rowid BETWEEN ? AND ? "
    "ORDER BY rank LIMIT ?"
)
"""A thread's turns by BM25: a turn's document is thread_pk * 2^32 + seq (migration 0010)."""
_UNINDEXED = "SELECT 1 FROM unindexed_turns WHERE thread_pk = ? AND seq < ? LIMIT 1"
_INDEX = (
    "INSERT INTO turn_search (rowid, words) SELECT doc, words FROM turn_words "
    "WHERE thread_pk = ? AND seq IN (SELECT seq FROM unindexed_turns WHERE thread_pk = ?)"
)
"""The turns a thread's search needs indexed (migration 0011), then indexed in one go."""
_DOCS_PER_THREAD = 2**32


def _read_tail(db: sqlite3.Connection, read: TailRead) -> tuple[Row, list[Row]] | None:
    """`SQLiteDialect.read_tail` on the reader's connection: one snapshot."""
    _open(db, "BEGIN")  # the read lock is held
    try:
        return _tail_rows(db, read)
    finally:
        db.execute("COMMIT")


def _tail_rows(db: sqlite3.Connection, read: TailRead) -> tuple[Row, list[Row]] | None:
    """The thread row and its newest turns, inside the caller's transaction: the turns are
    walked newest first and the walk stops where `read` is answered (`_walk`)."""
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


def _claim_and_read(
    db: sqlite3.Connection,
    claim: tuple[str, Sequence[object]],
    read: TailRead,
    opening: KnownAppend | None,
) -> tuple[bool, tuple[Row, list[Row]] | None, int | None]:
    """`SQLiteDialect.claim_and_read_tail` on the writer's connection: one transaction, so
    the read sees every write committed before the lock was taken, and the opening is
    written only to the thread the read found without turns (an error leaves the
    transaction to the session, which rolls it back)."""
    _open(db, "BEGIN IMMEDIATE")
    claimed = db.execute(*claim).rowcount == 1
    found = _tail_rows(db, read) if claimed else None
    base = None
    if claimed and opening is not None and (found is None or _empty(found[0], opening)):
        base = _write_known(db, opening)
        assert base == 0, "the read found the thread without turns, in this transaction"
    db.execute("COMMIT")
    return claimed, found, base


def _empty(thread: Row, opening: KnownAppend) -> bool:
    """Whether a thread's row (`_tail_rows`' first) has no turns, counted as `opening`'s are."""
    return bool(thread[4] == 0 and thread[6] == opening.tokenizers)


def _walk(turns: Iterable[Row], read: TailRead) -> list[Row]:
    """The rows `read` asks for from (seq, unit_seq, message, tokens, original) rows, newest
    first: at most `limit`; with a token goal, through the first turn whose counts pass it and
    the rest of its unit (a window takes units whole). A turn not counted yet leaves the goal
    undecided: `UNCOUNTED_PAGE` rows more are read from there, for the caller to count."""
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
    the COMMIT: an append is two trips to the connection's thread, not one per statement.

    With an `inline` connection (the loop's own, see `SQLiteDialect`), the trips run right
    here and cost no trip at all. Only the first trip can meet another process's lock (a
    write's ``BEGIN IMMEDIATE`` takes all it needs, a read's first statement its snapshot);
    told to wait there, the session rolls back what it began and goes to the connection's
    thread, which does the waiting (``busy_timeout``) off the loop."""

    def __init__(self, db: Connection, begin: str, inline: sqlite3.Connection | None) -> None:
        self._db = db
        self._inline = inline
        self._pending: list[Step] = [lambda c: _open(c, begin)]
        self._begun = False
        self._ended = False

    @property
    def inline(self) -> bool:
        """Whether the session ran on the loop's own connection."""
        return self._inline is not None

    async def _trip(self, last: Callable[[sqlite3.Connection], T]) -> T:
        pending, self._pending = self._pending, []

        def run(c: sqlite3.Connection) -> T:
            for step in pending:
                step(c)
            return last(c)

        first, self._begun = not self._begun, True
        if self._inline is not None:
            try:
                return run(self._inline)
            except sqlite3.OperationalError as exc:
                if not (first and _busy(exc)):
                    raise
                _rollback(self._inline)
                self._inline = None  # another process holds the lock: the thread waits
        return await self._db.call(run)

    async def whole(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Runs `fn`, which begins and ends its own transaction, as the session's one trip."""
        self._pending = []
        result = await self._trip(fn)
        self._ended = True
        return result

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
        self._ended = True
        return changed

    async def commit(self) -> None:
        if not self._ended:
            await self._trip(lambda c: c.execute("COMMIT"))

    def abandon(self) -> None:
        """Rolls back what the session began: at once on the loop's connection, else queued
        on the thread's, where it runs even if the task that asked is cancelled."""
        if self._inline is not None:
            _rollback(self._inline)
        else:
            self._db.submit(_rollback)

    def end_soon(self) -> None:
        """Ends a read: at once on the loop's connection, else its COMMIT is queued on the
        thread's, not waited for (every later call runs after it); nothing at all when the
        read ran no statement."""
        if not self._begun or self._ended:
            return
        if self._inline is not None:
            _rollback(self._inline)  # a read: nothing to keep
        else:
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


def _busy(exc: sqlite3.OperationalError) -> bool:
    """SQLite said to wait: another connection holds a lock (the primary code)."""
    return exc.sqlite_errorcode & 0xFF in _BUSY


_MOVE_ON = (
    "UPDATE threads SET turn_count = turn_count + ?, last_unit_seq = turn_count + ?, "
    "updated_at = ?, tokens_through = tokens_through + ? "
    "WHERE tenant_id = ? AND thread_id = ? AND turn_count = ? AND tokenizers = ? "
    "RETURNING id, turn_count - ?, tokens_through - ?"
)


def _append_known(db: sqlite3.Connection, write: KnownAppend) -> int | None:
    """`SQLiteDialect.append_known` in the writer's thread: one trip, one transaction."""
    _open(db, "BEGIN IMMEDIATE")
    base = _write_known(db, write)
    db.execute("ROLLBACK" if base is None else "COMMIT")
    return base


def _write_known(db: sqlite3.Connection, write: KnownAppend) -> int | None:
    """`write` in the open transaction: the seq its relative seqs count from, or None when the
    thread's row does not meet its expectation (then the caller rolls back the row a create
    may have made)."""
    if write.create:
        db.execute(INSERT_THREAD, write.thread_row())
    count = len(write.turns)
    relative, total = _rows.running_counts([turn[6] for turn in write.turns])
    found = db.execute(
        _MOVE_ON,
        (
            count,
            write.turns[-1][1],
            write.stamp,
            total,
            write.tenant_id,
            write.thread_id,
            write.turn_count,
            write.tokenizers,
            count,
            total,
        ),
    ).fetchone()
    if found is None:
        return None
    pk, base, before = found
    through = [None if before is None or n is None else before + n for n in relative]
    db.executemany(
        INSERT_TURN,
        [
            (
                pk,
                base + seq,
                base + unit,
                role,
                write.user_id,
                message,
                write.stamp,
                fmt,
                item,
                n,
                running,
                shed,
                shed_bytes,
            )
            for (seq, unit, role, message, fmt, item, n, shed, shed_bytes), running in zip(
                write.turns, through, strict=True
            )
        ],
    )
    db.executemany(INSERT_TURN_TOKENS, [(pk, key, base + seq, n) for key, seq, n in write.others])
    if write.release is not None:
        db.execute(RELEASE_THREAD, (write.tenant_id, write.thread_id, write.release))
    return int(base)


CHECKPOINT_CHANGES = 1_000
"""Rows the loop's writer writes between two checkpoints (about SQLite's own 1,000 pages)."""


def _connect_inline(path: str | None, pragma: str) -> sqlite3.Connection:
    """A connection for the loop's thread: never waits for a lock (`_Session` hands a busy
    session to a thread), used by one thread at a time (closed from any)."""
    assert path is not None
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    settings = (
        "PRAGMA busy_timeout = 0",
        "PRAGMA synchronous = NORMAL",
        "PRAGMA foreign_keys = ON",
    )
    for setting in (*settings, pragma):
        db.execute(setting)
    return db


def _checkpoint(db: sqlite3.Connection) -> None:
    db.execute("PRAGMA wal_checkpoint(PASSIVE)")


def _rollback(db: sqlite3.Connection) -> None:
    if db.in_transaction:
        db.execute("ROLLBACK")


class SQLiteDialect(Dialect):
    """SQLite's side of `SQLStore`: one writer, one reader, ISO timestamps.

    Each connection has its thread, so that nothing waits on the event loop. The loop's own
    thread (the one that first uses the store) also has a connection of each kind, with
    ``busy_timeout`` 0, and runs a session there whenever that costs no order: a trip to a
    thread (handing over, waking it, waking the loop) is more work than most sessions' SQL,
    and WAL lets a reader go on beside any writer. A write goes there only when the writer's
    thread has nothing queued; SQLite's lock, held by another process, sends the session to
    the thread (see `_Session`). The loop's writer never checkpoints (a checkpoint syncs the
    file): every `CHECKPOINT_CHANGES` rows it wrote, the writer's thread does."""

    window_with_lock = False
    """The window's read costs no round trip here (the loop's reader connection), and in the
    claim's transaction it would hold the write lock for as long as it reads."""
    name = "sqlite"
    lock = ""  # BEGIN IMMEDIATE serializes writers, across processes too

    def __init__(self, writer: Connection, reader: Connection, path: str | None = None) -> None:
        self._writer = writer
        self._reader = reader
        self._write_lock = asyncio.Lock()
        self._read_lock = self._write_lock if reader is writer else asyncio.Lock()
        self._path = path
        self._home: int | None = None
        """The thread whose connections `_inline_reader` and `_inline_writer` are."""
        self._inline: sqlite3.Connection | None = None
        self._inline_write: sqlite3.Connection | None = None
        self._checkpointed = 0
        """The loop's writer's `total_changes` at the last checkpoint it asked for."""

    @asynccontextmanager
    async def _writing(self, *, inline: bool = True) -> AsyncIterator[_Session]:
        """A write session, this task's until the block ends; a transaction the block leaves
        open (it failed, or was cancelled) is rolled back."""
        async with self._write_lock:
            here = self._inline_writer() if inline and self._writer.idle else None
            session = _Session(self._writer, "BEGIN IMMEDIATE", here)
            try:
                yield session
            except sqlite3.Error as exc:
                session.abandon()
                raise StoreError(f"SQLite failed: {exc}") from exc
            except BaseException:
                session.abandon()  # at once, or queued: run even if this task is cancelled
                raise
            finally:
                if session.inline:
                    self._checkpoint_soon()

    @asynccontextmanager
    async def write(self, *, inline: bool = True) -> AsyncIterator[_Session]:
        """`Dialect.write`; ``inline=False`` keeps it on the writer's thread."""
        async with self._writing(inline=inline) as session:
            yield session
            await session.commit()

    @asynccontextmanager
    async def read(self) -> AsyncIterator[_Session]:
        async with self._read_lock:
            session = _Session(self._reader, "BEGIN", self._inline_reader())
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
        async with self.read() as session:
            return await session.whole(lambda db: _read_tail(db, read))

    async def claim_and_read_tail(
        self,
        claim: tuple[str, Sequence[object]],
        read: TailRead,
        opening: KnownAppend | None = None,
    ) -> tuple[bool, tuple[Row, list[Row]] | None, int | None]:
        async with self._writing() as session:
            return await session.whole(lambda db: _claim_and_read(db, claim, read, opening))

    async def append_known(self, write: KnownAppend) -> int | None:
        async with self._writing() as session:
            return await session.whole(lambda db: _append_known(db, write))

    def _on_home_thread(self) -> bool:
        """Whether this is the thread of the loop's connections: the first to ask (the
        store's event loop). Never for a database in memory (one connection)."""
        if self._path is None:
            return False
        if self._home is None:
            self._home = threading.get_ident()
        return self._home == threading.get_ident()

    def _inline_reader(self) -> sqlite3.Connection | None:
        """The loop's read-only connection, opened on first use; None off its thread."""
        if not self._on_home_thread():
            return None
        if self._inline is None:
            self._inline = _connect_inline(self._path, "PRAGMA query_only = ON")
        return self._inline

    def _inline_writer(self) -> sqlite3.Connection | None:
        """The loop's writing connection, opened on first use; None off its thread."""
        if not self._on_home_thread():
            return None
        if self._inline_write is None:
            self._inline_write = _connect_inline(self._path, "PRAGMA wal_autocheckpoint = 0")
            self._checkpointed = self._inline_write.total_changes
        return self._inline_write

    def _checkpoint_soon(self) -> None:
        """Hands the WAL's checkpoint to the writer's thread once the loop's writer has
        written `CHECKPOINT_CHANGES` rows since the last (SQLite's own is off there)."""
        db = self._inline_write
        if db is not None and db.total_changes - self._checkpointed >= CHECKPOINT_CHANGES:
            self._checkpointed = db.total_changes
            self._writer.submit(_checkpoint)

    def search(self, search: TurnSearch) -> tuple[str, Sequence[object]]:
        base = search.thread_pk * _DOCS_PER_THREAD
        match = " OR ".join(f'"{term}"' for term in search.terms)  # words: no quote inside
        return _SEARCH, (base, match, base + 1, base + search.before_seq - 1, search.limit)

    def unindexed(self, thread_pk: int, before_seq: int) -> tuple[str, Sequence[object]] | None:
        return _UNINDEXED, (thread_pk, before_seq)

    async def index_turns(self, thread_pk: int) -> None:
        async with self.write() as session:
            await session.queue(_INDEX, (thread_pk, thread_pk))
            await session.last("DELETE FROM unindexed_turns WHERE thread_pk = ?", (thread_pk,))

    async def migrate(self) -> None:
        # On the writer's thread: whichever thread opens the store, its loop's comes later.
        async with self.write(inline=False) as session:
            await session.run(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
            )
            done = {row[0] for row in await session.rows("SELECT version FROM schema_migrations")}
        for migration in load_migrations("sqlite"):
            if migration.version in done:
                continue
            async with self.write(inline=False) as session:
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
        for db in (self._inline, self._inline_write):
            if db is not None:
                db.close()
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
