"""The PostgreSQL store: many workers on many machines share one database.

    store = await PostgresStore.open("postgresql://app@db:5432/memory")

psycopg 3 (async) with a connection pool; needs the ``postgres`` extra. Appends to one thread
are serialized by a row lock on the thread (``SELECT ... FOR UPDATE``), so two workers never
give two turns the same seq; state writes are compare-and-set on the state's version.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Self

from ..errors import ConflictError, NotFoundError, StoreError, ValidationError, WorkingMemoryError
from ..messages import OpenUnit, check_id, normalize_messages
from ..tokens import Tokenizer
from ..types import Thread, Turn, WorkingMemoryState
from . import _rows
from ._postgres_documents import PostgresDocuments
from ._postgres_keys import PostgresKeys
from .base import StateWrite, Tail
from .migrations import load_migrations

try:
    import psycopg
    from psycopg_pool import AsyncConnectionPool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "the PostgreSQL store needs the postgres extra: pip install 'workingmem[postgres]'"
    ) from exc

__all__ = ["PostgresStore"]

_THREAD_COLUMNS = (
    "id, tenant_id, thread_id, user_id, turn_count, last_unit_seq, tokenizers, created_at, "
    "updated_at"
)
_THREAD_COLUMNS_TH = (
    "th.id, th.tenant_id, th.thread_id, th.user_id, th.turn_count, th.last_unit_seq, "
    "th.tokenizers, th.created_at, th.updated_at"
)
_MIGRATION_LOCK = 0x776D656D  # "wmem": one migrator at a time across workers

Conn = psycopg.AsyncConnection[tuple[Any, ...]]


def _thread(row: Sequence[Any]) -> Thread:
    return Thread(
        tenant_id=row[1],
        thread_id=row[2],
        user_id=row[3],
        turn_count=row[4],
        created_at=row[7],
        updated_at=row[8],
    )


class PostgresStore(PostgresDocuments, PostgresKeys):
    """A ThreadStore on PostgreSQL."""

    def __init__(self, pool: AsyncConnectionPool[Conn]) -> None:
        self._pool = pool

    @classmethod
    async def open(cls, url: str, *, min_size: int = 1, max_size: int = 10) -> PostgresStore:
        """Connects a pool to `url` and migrates the schema."""
        # Autocommit: a single-statement read is one round trip; writes open their own
        # transaction blocks.
        pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            url, min_size=min_size, max_size=max_size, open=False, kwargs={"autocommit": True}
        )
        try:
            await pool.open(wait=True, timeout=15)
        except Exception as exc:
            await pool.close()
            raise StoreError(f"cannot connect to PostgreSQL: {exc}") from exc
        store = cls(pool)
        try:
            await store._migrate()
        except BaseException:
            await pool.close()
            raise
        return store

    async def aclose(self) -> None:
        await self._pool.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    @asynccontextmanager
    async def _tx(self) -> AsyncIterator[Conn]:
        try:
            async with self._pool.connection() as conn, conn.transaction():
                yield conn
        except WorkingMemoryError:
            raise
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL failed: {exc}") from exc

    @asynccontextmanager
    async def _read(self) -> AsyncIterator[Conn]:
        """A connection for one read statement, outside a transaction block."""
        try:
            async with self._pool.connection() as conn:
                yield conn
        except WorkingMemoryError:
            raise
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL failed: {exc}") from exc

    async def _migrate(self) -> None:
        for migration in load_migrations("postgres"):
            async with self._tx() as conn:
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                await conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
                    "name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
                )
                cursor = await conn.execute(
                    "SELECT 1 FROM schema_migrations WHERE version = %s", (migration.version,)
                )
                if await cursor.fetchone() is not None:
                    continue
                for statement in migration.statements:
                    await conn.execute(statement.encode())
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                    (migration.version, migration.name),
                )

    async def _thread_row(
        self, conn: Conn, tenant_id: str, thread_id: str, *, lock: bool = False
    ) -> tuple[Any, ...]:
        cursor = await conn.execute(
            f"SELECT {_THREAD_COLUMNS} FROM threads WHERE tenant_id = %s AND thread_id = %s"
            + (" FOR UPDATE" if lock else ""),
            (tenant_id, thread_id),
        )
        row = await cursor.fetchone()
        if row is None:
            raise NotFoundError("thread", thread_id)
        return row

    # -- threads and turns -------------------------------------------------------------------

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
        async with self._tx() as conn:
            try:
                row = await self._thread_row(conn, tenant_id, thread_id, lock=True)
            except NotFoundError:
                await conn.execute(
                    "INSERT INTO threads (tenant_id, thread_id, user_id, created_at, updated_at) "
                    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (tenant_id, thread_id) DO NOTHING",
                    (tenant_id, thread_id, user_id, now, now),
                )
                row = await self._thread_row(conn, tenant_id, thread_id, lock=True)
            pk, turn_count, last_unit_seq = row[0], row[4], row[5]
            if not clean:
                return []
            open_unit = None
            if last_unit_seq:
                cursor = await conn.execute(
                    "SELECT message FROM turns WHERE thread_pk = %s AND seq >= %s ORDER BY seq",
                    (pk, last_unit_seq),
                )
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
            async with conn.cursor() as cursor:
                await cursor.executemany(
                    "INSERT INTO turns (thread_pk, seq, unit_seq, role, user_id, message, "
                    "created_at) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                    [
                        (pk, t.seq, t.unit_seq, t.message["role"], user_id, text, now)
                        for t, text in zip(prepared.turns, prepared.serialized, strict=True)
                    ],
                )
                if prepared.counts:
                    await cursor.executemany(
                        "INSERT INTO turn_tokens (thread_pk, tokenizer, seq, tokens) "
                        "VALUES (%s, %s, %s, %s)",
                        [(pk, key, seq, tokens) for key, seq, tokens in prepared.counts],
                    )
            await conn.execute(
                "UPDATE threads SET turn_count = %s, last_unit_seq = %s, updated_at = %s "
                "WHERE id = %s",
                (prepared.turns[-1].seq, prepared.last_unit_seq, now, pk),
            )
        return [Turn.from_message(t.message, seq=t.seq, created_at=now) for t in prepared.turns]

    async def get_thread(self, *, tenant_id: str, thread_id: str) -> Thread:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        async with self._tx() as conn:
            return _thread(await self._thread_row(conn, tenant_id, thread_id))

    async def list_threads(
        self, *, tenant_id: str, limit: int = 50, offset: int = 0
    ) -> list[Thread]:
        check_id("tenant_id", tenant_id)
        _rows.check_page(limit, offset)
        async with self._tx() as conn:
            cursor = await conn.execute(
                f"SELECT {_THREAD_COLUMNS} FROM threads WHERE tenant_id = %s "
                "ORDER BY updated_at DESC, id DESC LIMIT %s OFFSET %s",
                (tenant_id, limit, offset),
            )
            return [_thread(row) for row in await cursor.fetchall()]

    async def list_turns(
        self, *, tenant_id: str, thread_id: str, after_seq: int = 0, limit: int = 100
    ) -> list[Turn]:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        _rows.check_page(limit, 0)
        if after_seq < 0:
            raise ValidationError("after_seq", f"must not be negative, got {after_seq}")
        async with self._tx() as conn:
            pk = (await self._thread_row(conn, tenant_id, thread_id))[0]
            cursor = await conn.execute(
                "SELECT seq, message, created_at FROM turns WHERE thread_pk = %s AND seq > %s "
                "ORDER BY seq LIMIT %s",
                (pk, after_seq, limit),
            )
            rows = await cursor.fetchall()
        return [
            Turn.from_message(_rows.loads_message(r[1]), seq=r[0], created_at=r[2]) for r in rows
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
        # One statement, one round trip, outside a transaction block (it is its own
        # snapshot). The count is a per-row index lookup, so the plan does not depend on the
        # planner's statistics of a thread that grew in a burst.
        async with self._read() as conn:
            cursor = await conn.execute(
                f"SELECT {_THREAD_COLUMNS_TH}, t.seq, t.unit_seq, t.message, t.tokens "
                "FROM threads AS th LEFT JOIN LATERAL ("
                " SELECT u.seq, u.unit_seq, u.message, (SELECT k.tokens FROM turn_tokens AS k"
                "  WHERE k.thread_pk = u.thread_pk AND k.tokenizer = %s AND k.seq = u.seq)"
                "  AS tokens"
                " FROM turns AS u WHERE u.thread_pk = th.id"
                " AND u.seq < coalesce(%s, th.turn_count + 1)"
                " ORDER BY u.seq DESC LIMIT %s) AS t ON true "
                "WHERE th.tenant_id = %s AND th.thread_id = %s ORDER BY t.seq DESC",
                (tokenizer.key, before_seq, limit, tenant_id, thread_id),
            )
            rows = await cursor.fetchall()
        if not rows:
            raise NotFoundError("thread", thread_id)
        row = tuple(rows[0][:9])
        tail = [r[9:] for r in rows if r[9] is not None]
        turns, missing = _rows.counted_tail(tokenizer, tail)
        if missing or tokenizer.key not in _rows.tokenizers_of(row[6]):
            await self._remember_counts(row[0], tokenizer.key, missing)
        return Tail(thread=_thread(row), turns=turns)

    async def _remember_counts(self, pk: int, key: str, counts: dict[int, int]) -> None:
        async with self._tx() as conn:
            cursor = await conn.execute(
                "SELECT tokenizers FROM threads WHERE id = %s FOR UPDATE", (pk,)
            )
            found = await cursor.fetchone()
            if found is None:
                return
            keys = _rows.tokenizers_of(found[0])
            if key not in keys:
                await conn.execute(
                    "UPDATE threads SET tokenizers = %s WHERE id = %s",
                    (json.dumps([*keys, key]), pk),
                )
            if counts:
                async with conn.cursor() as cur:
                    await cur.executemany(
                        "INSERT INTO turn_tokens (thread_pk, tokenizer, seq, tokens) "
                        "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                        [(pk, key, seq, tokens) for seq, tokens in counts.items()],
                    )

    # -- memory state ------------------------------------------------------------------------

    async def get_memory_state(self, *, tenant_id: str, thread_id: str) -> WorkingMemoryState:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        async with self._tx() as conn:
            pk = (await self._thread_row(conn, tenant_id, thread_id))[0]
            cursor = await conn.execute(
                "SELECT version, summary, facts, turn_count, updated_at FROM memory_states "
                "WHERE thread_pk = %s",
                (pk,),
            )
            found = await cursor.fetchone()
        if found is None:
            return WorkingMemoryState()
        return _rows.state_from_row(*found)

    async def write_memory_state(
        self, *, tenant_id: str, thread_id: str, write: StateWrite
    ) -> WorkingMemoryState:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        now = _rows.utcnow()
        facts = _rows.encode_facts(write.facts)
        async with self._tx() as conn:
            pk = (await self._thread_row(conn, tenant_id, thread_id, lock=True))[0]
            cursor = await conn.execute(
                "SELECT version FROM memory_states WHERE thread_pk = %s", (pk,)
            )
            found = await cursor.fetchone()
            current = 0 if found is None else found[0]
            if current != write.expected_version:
                raise ConflictError(
                    f"thread {thread_id!r}: memory state is at version {current}, "
                    f"not {write.expected_version}"
                )
            version = current + 1
            await conn.execute(
                "INSERT INTO memory_states (thread_pk, version, summary, facts, turn_count, "
                "updated_at) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (thread_pk) DO UPDATE "
                "SET version = excluded.version, summary = excluded.summary, "
                "facts = excluded.facts, turn_count = excluded.turn_count, "
                "updated_at = excluded.updated_at",
                (pk, version, write.summary, facts, write.turn_count, now),
            )
            await conn.execute(
                "INSERT INTO memory_state_versions (thread_pk, version, summary, facts, "
                "turn_count, reason, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (pk, version, write.summary, facts, write.turn_count, write.reason, now),
            )
            if write.forgets:
                await conn.execute(
                    "DELETE FROM memory_state_versions WHERE thread_pk = %s AND version < %s",
                    (pk, version),
                )
        return _rows.state_from_row(version, write.summary, facts, write.turn_count, now)

    async def claim_memory_update(
        self, *, tenant_id: str, thread_id: str, owner: str, ttl_seconds: float
    ) -> bool:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        now = _rows.utcnow()
        async with self._tx() as conn:
            pk = (await self._thread_row(conn, tenant_id, thread_id))[0]
            cursor = await conn.execute(
                "INSERT INTO memory_leases (thread_pk, owner, expires_at) VALUES (%s, %s, %s) "
                "ON CONFLICT (thread_pk) DO UPDATE SET owner = excluded.owner, "
                "expires_at = excluded.expires_at WHERE memory_leases.expires_at < %s",
                (pk, owner, _rows.later(now, ttl_seconds), now),
            )
            return cursor.rowcount == 1

    async def release_memory_update(self, *, tenant_id: str, thread_id: str, owner: str) -> None:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        async with self._tx() as conn:
            pk = (await self._thread_row(conn, tenant_id, thread_id))[0]
            await conn.execute(
                "DELETE FROM memory_leases WHERE thread_pk = %s AND owner = %s", (pk, owner)
            )

    async def list_memory_states(
        self, *, tenant_id: str, thread_id: str, limit: int = 20
    ) -> list[WorkingMemoryState]:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        _rows.check_page(limit, 0)
        async with self._tx() as conn:
            pk = (await self._thread_row(conn, tenant_id, thread_id))[0]
            cursor = await conn.execute(
                "SELECT version, summary, facts, turn_count, created_at "
                "FROM memory_state_versions WHERE thread_pk = %s ORDER BY version DESC LIMIT %s",
                (pk, limit),
            )
            rows = await cursor.fetchall()
        return [_rows.state_from_row(*r) for r in rows]
