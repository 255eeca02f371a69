"""The embedded default store: one SQLite file in WAL mode, through aiosqlite.

    store = await SQLiteStore.open(".workingmem/memory.db")
    try:
        await store.append(tenant_id="t1", thread_id="th1", messages=[...])
    finally:
        await store.aclose()

Two connections: one writer, whose transactions are `BEGIN IMMEDIATE` and serialized by a
lock (so two coroutines never interleave inside one transaction), and one reader, whose
multi-statement reads run in one snapshot. WAL lets the reader go on while the writer writes,
and other processes share the file safely (``busy_timeout`` waits for their locks).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import aiosqlite

from ..errors import ConflictError, NotFoundError, StoreError, ValidationError
from ..messages import OpenUnit, check_id, normalize_messages
from ..tokens import Tokenizer
from ..types import Thread, Turn, WorkingMemoryState
from . import _rows
from ._sqlite_documents import SQLiteDocuments
from ._sqlite_keys import SQLiteKeys
from .base import StateWrite, Tail
from .migrations import load_migrations

__all__ = ["SQLiteStore"]

_THREAD_COLUMNS_TH = (
    "th.id, th.tenant_id, th.thread_id, th.user_id, th.turn_count, th.last_unit_seq, "
    "th.tokenizers, th.created_at, th.updated_at"
)
_THREAD_COLUMNS = (
    "id, tenant_id, thread_id, user_id, turn_count, last_unit_seq, tokenizers, created_at, "
    "updated_at"
)


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _thread(row: sqlite3.Row | tuple[Any, ...]) -> Thread:
    return Thread(
        tenant_id=row[1],
        thread_id=row[2],
        user_id=row[3],
        turn_count=row[4],
        created_at=_ts(row[7]),
        updated_at=_ts(row[8]),
    )


class SQLiteStore(SQLiteDocuments, SQLiteKeys):
    """A ThreadStore on one SQLite file (or ``:memory:``)."""

    def __init__(self, writer: aiosqlite.Connection, reader: aiosqlite.Connection) -> None:
        self._writer = writer
        self._reader = reader
        self._write_lock = asyncio.Lock()
        self._read_lock = self._write_lock if reader is writer else asyncio.Lock()

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
        store = cls(writer, reader)
        await store._migrate()
        return store

    async def aclose(self) -> None:
        await self._writer.close()
        if self._reader is not self._writer:
            await self._reader.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- transactions ------------------------------------------------------------------------

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[aiosqlite.Connection]:
        async with self._write_lock:
            db = self._writer
            try:
                await db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite could not begin a write: {exc}") from exc
            try:
                yield db
            except sqlite3.Error as exc:
                await db.execute("ROLLBACK")
                raise StoreError(f"SQLite failed: {exc}") from exc
            except BaseException:
                await db.execute("ROLLBACK")
                raise
            try:
                await db.execute("COMMIT")
            except sqlite3.Error as exc:
                await db.execute("ROLLBACK")
                raise StoreError(f"SQLite could not commit: {exc}") from exc

    @asynccontextmanager
    async def _read(self) -> AsyncIterator[aiosqlite.Connection]:
        async with self._read_lock:
            db = self._reader
            await db.execute("BEGIN")
            try:
                yield db
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite failed: {exc}") from exc
            finally:
                await db.execute("COMMIT")

    async def _migrate(self) -> None:
        async with self._write() as db:
            await db.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
            )
            async with db.execute("SELECT version FROM schema_migrations") as cursor:
                done = {row[0] for row in await cursor.fetchall()}
        for migration in load_migrations("sqlite"):
            if migration.version in done:
                continue
            async with self._write() as db:
                async with db.execute(
                    "SELECT 1 FROM schema_migrations WHERE version = ?", (migration.version,)
                ) as cursor:
                    if await cursor.fetchone() is not None:
                        continue  # another process applied it meanwhile
                for statement in migration.statements:
                    await db.execute(statement)
                await db.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                    (migration.version, migration.name, _rows.utcnow().isoformat()),
                )

    # -- threads and turns -------------------------------------------------------------------

    async def _thread_row(
        self, db: aiosqlite.Connection, tenant_id: str, thread_id: str
    ) -> tuple[Any, ...]:
        async with db.execute(
            f"SELECT {_THREAD_COLUMNS} FROM threads WHERE tenant_id = ? AND thread_id = ?",
            (tenant_id, thread_id),
        ) as cursor:
            row = await cursor.fetchone()
        if row is None:
            raise NotFoundError("thread", thread_id)
        return tuple(row)

    async def append(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        messages: Sequence[Any],
        user_id: str | None = None,
    ) -> list[Turn]:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        if user_id is not None:
            check_id("user_id", user_id)
        clean = normalize_messages(messages)
        now = _rows.utcnow()
        stamp = now.isoformat()
        async with self._write() as db:
            try:
                row = await self._thread_row(db, tenant_id, thread_id)
            except NotFoundError:
                cursor = await db.execute(
                    "INSERT INTO threads (tenant_id, thread_id, user_id, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (tenant_id, thread_id, user_id, stamp, stamp),
                )
                row = (cursor.lastrowid, tenant_id, thread_id, user_id, 0, 0, "[]", stamp, stamp)
            pk, turn_count, last_unit_seq = row[0], row[4], row[5]
            if not clean:
                return []
            open_unit = None
            if last_unit_seq:
                async with db.execute(
                    "SELECT message FROM turns WHERE thread_pk = ? AND seq >= ? ORDER BY seq",
                    (pk, last_unit_seq),
                ) as cursor:
                    unit_rows = await cursor.fetchall()
                open_unit = OpenUnit.from_turns(
                    [_rows.loads_message(r[0]) for r in unit_rows], last_unit_seq
                )
            prepared = _rows.plan_append(
                clean,
                turn_count=turn_count,
                open_unit=open_unit,
                tokenizer_keys=_rows.tokenizers_of(row[6]),
            )
            await db.executemany(
                "INSERT INTO turns (thread_pk, seq, unit_seq, role, user_id, message, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (pk, t.seq, t.unit_seq, t.message["role"], user_id, text, stamp)
                    for t, text in zip(prepared.turns, prepared.serialized, strict=True)
                ],
            )
            if prepared.counts:
                await db.executemany(
                    "INSERT INTO turn_tokens (thread_pk, tokenizer, seq, tokens) "
                    "VALUES (?, ?, ?, ?)",
                    [(pk, key, seq, tokens) for key, seq, tokens in prepared.counts],
                )
            await db.execute(
                "UPDATE threads SET turn_count = ?, last_unit_seq = ?, updated_at = ? WHERE id = ?",
                (prepared.turns[-1].seq, prepared.last_unit_seq, stamp, pk),
            )
        return [Turn.from_message(t.message, seq=t.seq, created_at=now) for t in prepared.turns]

    async def get_thread(self, *, tenant_id: str, thread_id: str) -> Thread:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        async with self._read() as db:
            return _thread(await self._thread_row(db, tenant_id, thread_id))

    async def list_threads(
        self, *, tenant_id: str, limit: int = 50, offset: int = 0
    ) -> list[Thread]:
        check_id("tenant_id", tenant_id)
        _rows.check_page(limit, offset)
        async with (
            self._read() as db,
            db.execute(
                f"SELECT {_THREAD_COLUMNS} FROM threads WHERE tenant_id = ? "
                "ORDER BY updated_at DESC, id DESC LIMIT ? OFFSET ?",
                (tenant_id, limit, offset),
            ) as cursor,
        ):
            return [_thread(tuple(row)) for row in await cursor.fetchall()]

    async def list_turns(
        self, *, tenant_id: str, thread_id: str, after_seq: int = 0, limit: int = 100
    ) -> list[Turn]:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        _rows.check_page(limit, 0)
        if after_seq < 0:
            raise ValidationError("after_seq", f"must not be negative, got {after_seq}")
        async with self._read() as db:
            pk = (await self._thread_row(db, tenant_id, thread_id))[0]
            async with db.execute(
                "SELECT seq, message, created_at FROM turns WHERE thread_pk = ? AND seq > ? "
                "ORDER BY seq LIMIT ?",
                (pk, after_seq, limit),
            ) as cursor:
                rows = await cursor.fetchall()
        return [
            Turn.from_message(_rows.loads_message(r[1]), seq=r[0], created_at=_ts(r[2]))
            for r in rows
        ]

    async def read_tail(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        tokenizer: Tokenizer,
        limit: int,
        before_seq: int | None = None,
    ) -> Tail:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        # One statement, one trip to the driver's thread: the thread row joined to its tail.
        # A single SELECT is its own snapshot; an empty thread still gives its row.
        async with self._read_lock:
            rows = list(
                await self._reader.execute_fetchall(
                    f"SELECT {_THREAD_COLUMNS_TH}, t.seq, t.unit_seq, t.message, "
                    "(SELECT k.tokens FROM turn_tokens AS k WHERE k.thread_pk = th.id "
                    "AND k.tokenizer = ? AND k.seq = t.seq) "
                    "FROM threads AS th LEFT JOIN turns AS t ON t.thread_pk = th.id "
                    "AND t.seq < coalesce(?, th.turn_count + 1) "
                    "WHERE th.tenant_id = ? AND th.thread_id = ? ORDER BY t.seq DESC LIMIT ?",
                    (tokenizer.key, before_seq, tenant_id, thread_id, limit),
                )
            )
        if not rows:
            raise NotFoundError("thread", thread_id)
        row = tuple(rows[0][:9])
        tail = [r[9:] for r in rows if r[9] is not None]
        turns, missing = _rows.counted_tail(tokenizer, tail)
        if missing or tokenizer.key not in _rows.tokenizers_of(row[6]):
            await self._remember_counts(row[0], tokenizer.key, missing)
        return Tail(thread=_thread(row), turns=turns)

    async def _remember_counts(self, pk: int, key: str, counts: dict[int, int]) -> None:
        async with self._write() as db:
            async with db.execute("SELECT tokenizers FROM threads WHERE id = ?", (pk,)) as cursor:
                found = await cursor.fetchone()
            if found is None:
                return  # the thread was deleted meanwhile
            keys = _rows.tokenizers_of(found[0])
            if key not in keys:
                await db.execute(
                    "UPDATE threads SET tokenizers = ? WHERE id = ?", (json.dumps([*keys, key]), pk)
                )
            await db.executemany(
                "INSERT OR IGNORE INTO turn_tokens (thread_pk, tokenizer, seq, tokens) "
                "VALUES (?, ?, ?, ?)",
                [(pk, key, seq, tokens) for seq, tokens in counts.items()],
            )

    # -- memory state ------------------------------------------------------------------------

    async def get_memory_state(self, *, tenant_id: str, thread_id: str) -> WorkingMemoryState:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        async with self._read() as db:
            pk = (await self._thread_row(db, tenant_id, thread_id))[0]
            async with db.execute(
                "SELECT version, summary, facts, turn_count, updated_at FROM memory_states "
                "WHERE thread_pk = ?",
                (pk,),
            ) as cursor:
                found = await cursor.fetchone()
        if found is None:
            return WorkingMemoryState()
        return _rows.state_from_row(found[0], found[1], found[2], found[3], _ts(found[4]))

    async def write_memory_state(
        self, *, tenant_id: str, thread_id: str, write: StateWrite
    ) -> WorkingMemoryState:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        stamp = _rows.utcnow().isoformat()
        facts = _rows.encode_facts(write.facts)
        async with self._write() as db:
            pk = (await self._thread_row(db, tenant_id, thread_id))[0]
            async with db.execute(
                "SELECT version FROM memory_states WHERE thread_pk = ?", (pk,)
            ) as cursor:
                found = await cursor.fetchone()
            current = 0 if found is None else found[0]
            if current != write.expected_version:
                raise ConflictError(
                    f"thread {thread_id!r}: memory state is at version {current}, "
                    f"not {write.expected_version}"
                )
            version = current + 1
            await db.execute(
                "INSERT INTO memory_states (thread_pk, version, summary, facts, turn_count, "
                "updated_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (thread_pk) DO UPDATE SET "
                "version = excluded.version, summary = excluded.summary, facts = excluded.facts, "
                "turn_count = excluded.turn_count, updated_at = excluded.updated_at",
                (pk, version, write.summary, facts, write.turn_count, stamp),
            )
            await db.execute(
                "INSERT INTO memory_state_versions (thread_pk, version, summary, facts, "
                "turn_count, reason, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (pk, version, write.summary, facts, write.turn_count, write.reason, stamp),
            )
            if write.forgets:
                await db.execute(
                    "DELETE FROM memory_state_versions WHERE thread_pk = ? AND version < ?",
                    (pk, version),
                )
        return _rows.state_from_row(version, write.summary, facts, write.turn_count, _ts(stamp))

    async def claim_memory_update(
        self, *, tenant_id: str, thread_id: str, owner: str, ttl_seconds: float
    ) -> bool:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        now = _rows.utcnow()
        async with self._write() as db:
            pk = (await self._thread_row(db, tenant_id, thread_id))[0]
            cursor = await db.execute(
                "INSERT INTO memory_leases (thread_pk, owner, expires_at) VALUES (?, ?, ?) "
                "ON CONFLICT (thread_pk) DO UPDATE SET owner = excluded.owner, "
                "expires_at = excluded.expires_at WHERE memory_leases.expires_at < ?",
                (pk, owner, _rows.later(now, ttl_seconds).isoformat(), now.isoformat()),
            )
            return cursor.rowcount == 1

    async def release_memory_update(self, *, tenant_id: str, thread_id: str, owner: str) -> None:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        async with self._write() as db:
            pk = (await self._thread_row(db, tenant_id, thread_id))[0]
            await db.execute(
                "DELETE FROM memory_leases WHERE thread_pk = ? AND owner = ?", (pk, owner)
            )

    async def list_memory_states(
        self, *, tenant_id: str, thread_id: str, limit: int = 20
    ) -> list[WorkingMemoryState]:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        _rows.check_page(limit, 0)
        async with self._read() as db:
            pk = (await self._thread_row(db, tenant_id, thread_id))[0]
            async with db.execute(
                "SELECT version, summary, facts, turn_count, created_at FROM memory_state_versions "
                "WHERE thread_pk = ? ORDER BY version DESC LIMIT ?",
                (pk, limit),
            ) as cursor:
                rows = await cursor.fetchall()
        return [_rows.state_from_row(r[0], r[1], r[2], r[3], _ts(r[4])) for r in rows]


async def _connect(path: str) -> aiosqlite.Connection:
    db = await aiosqlite.connect(path, isolation_level=None)
    await db.execute("PRAGMA journal_mode = WAL")
    await db.execute("PRAGMA synchronous = NORMAL")
    await db.execute("PRAGMA foreign_keys = ON")
    await db.execute("PRAGMA busy_timeout = 10000")
    return db
