"""The PostgreSQL store: many workers on many machines share one database.

    store = await PostgresStore.open("postgresql://app@db:5432/memory")

psycopg 3 (async) with a connection pool; needs the ``postgres`` extra. A write locks the rows
it reads (``SELECT ... FOR UPDATE``): appends to one thread are serialized on the thread's row,
so two workers never give two turns the same seq; state writes are compare-and-set on the
state's version. Reads of one statement run outside a transaction block: one round trip.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from datetime import datetime
from functools import lru_cache
from typing import Any

from ..errors import StoreError, WorkingMemoryError
from ._dialect import UNCOUNTED_PAGE, Dialect, Row, TailRead
from ._sql_threads import THREAD_COLUMNS
from .migrations import load_migrations
from .sql import SQLStore

try:
    import psycopg
    from psycopg import AsyncPipeline
    from psycopg.pq import TransactionStatus
    from psycopg_pool import AsyncConnectionPool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "the PostgreSQL store needs the postgres extra: pip install 'workingmem[postgres]'"
    ) from exc

__all__ = ["PostgresStore"]

_MIGRATION_LOCK = 0x776D656D  # "wmem": one migrator at a time across workers
_TAIL = f"""
WITH th AS (SELECT {THREAD_COLUMNS} FROM threads
            WHERE tenant_id = %(tenant_id)s AND thread_id = %(thread_id)s),
top AS (SELECT id AS pk, least(turn_count, coalesce(%(before_seq)s::bigint - 1, turn_count)) AS seq,
               coalesce(tokenizers::json ->> 0 = %(tokenizer)s, false) AS own
        FROM th),
scan AS (
  SELECT u.seq, u.unit_seq, CASE WHEN (SELECT own FROM top) THEN u.tokens
    ELSE (SELECT k.tokens FROM turn_tokens AS k WHERE k.thread_pk = u.thread_pk
          AND k.tokenizer = %(tokenizer)s AND k.seq = u.seq) END AS tokens
  FROM turns AS u
  WHERE %(tokens)s::bigint IS NOT NULL AND u.thread_pk = (SELECT pk FROM top)
    AND u.seq <= (SELECT seq FROM top) AND u.seq > (SELECT seq FROM top) - %(scan)s
  ORDER BY u.seq DESC LIMIT %(scan)s),
walk AS (
  SELECT seq, unit_seq, tokens,
         coalesce(sum(tokens) OVER newest, 0) - coalesce(tokens, 0) AS newer,
         count(*) FILTER (WHERE tokens IS NULL) OVER newest AS uncounted
  FROM scan WINDOW newest AS (ORDER BY seq DESC ROWS UNBOUNDED PRECEDING)),
stop AS (
  SELECT min(unit_seq) FILTER (WHERE uncounted = 0 AND newer <= %(tokens)s::bigint
                               AND newer + tokens > %(tokens)s::bigint) AS passed,
         min(seq) FILTER (WHERE uncounted BETWEEN 1 AND {UNCOUNTED_PAGE}) AS uncounted,
         min(seq) AS scanned
  FROM walk),
span AS (SELECT CASE WHEN %(tokens)s::bigint IS NULL THEN top.seq - %(limit)s + 1
                     ELSE coalesce(stop.passed, stop.uncounted, stop.scanned, top.seq + 1) END
                AS first
         FROM top, stop)
SELECT th.*, NULL::integer AS seq, NULL::integer, NULL::text, NULL::integer FROM th
UNION ALL
SELECT NULL::bigint, NULL, NULL, NULL, NULL::integer, NULL::integer, NULL, NULL::timestamptz,
       NULL::timestamptz, t.seq, t.unit_seq, t.message,
       CASE WHEN (SELECT own FROM top) THEN t.tokens
         ELSE (SELECT k.tokens FROM turn_tokens AS k WHERE k.thread_pk = t.thread_pk
               AND k.tokenizer = %(tokenizer)s AND k.seq = t.seq) END
FROM (SELECT u.thread_pk, u.seq, u.unit_seq, u.message, u.tokens FROM turns AS u
      WHERE u.thread_pk = (SELECT pk FROM top) AND u.seq <= (SELECT seq FROM top)
        AND u.seq >= (SELECT first FROM span)
      ORDER BY u.seq DESC LIMIT %(limit)s) AS t
ORDER BY seq DESC NULLS FIRST
"""
"""The thread row, then its newest turns, in one statement (the thread's columns once, not
on every turn's row). With a token goal the newest counts (the turns' own, or another
tokenizer's) are summed newest first over a bounded scan (bounded by seq, not only by LIMIT, so
that no plan reads the whole thread when the statistics are stale): the turns are read from the
head of the unit of the first turn that passes the goal (a window takes units whole); a turn
not counted yet leaves the goal undecided, and `UNCOUNTED_PAGE` turns from it are read for the
caller to count."""
_SCAN_TOKENS_PER_TURN = 20
"""The token goal's count scan is bounded at goal / this + 32 turns (LoCoMo turns average 35;
a thread of shorter turns costs one more read, never a wrong window)."""

Conn = psycopg.AsyncConnection[tuple[Any, ...]]


@lru_cache(maxsize=256)
def _placeholders(sql: str) -> str:
    return sql.replace("?", "%s")


_VALUES = re.compile(r"(INSERT INTO .+? VALUES )(\([?, ]+\))(.*)", re.DOTALL)
"""An INSERT of one row of parameters: its rows can travel as one statement."""
_MAX_PARAMETERS = 30_000
"""Parameters per statement (PostgreSQL allows 65,535)."""


def _native(sql: str, params: Sequence[object]) -> tuple[str, Sequence[object] | None]:
    """The store's ``?`` placeholders as psycopg's ``%s`` (its statements with parameters
    have no other ``?`` or ``%``); a statement without parameters is sent as it is."""
    if not params:
        return sql, None
    return _placeholders(sql), params


class _Session:
    """Statements on one pooled connection. In a write the connection is in pipeline mode:
    what is queued (its BEGIN, the writes whose result nobody reads, the COMMIT) is sent with
    the next statement that is read, or at the end, so an append is two round trips."""

    def __init__(self, conn: Conn, pipeline: AsyncPipeline | None = None) -> None:
        self._conn = conn
        self._pipeline = pipeline
        self.committed = False

    async def _result(self, sql: str, params: Sequence[object]) -> psycopg.AsyncCursor[Row]:
        cursor = await self._conn.execute(*_native(sql, params))
        if self._pipeline is not None:
            await self._pipeline.sync()  # the round trip: this result, and all queued before it
        return cursor

    async def rows(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        cursor = await self._result(sql, params)
        return await cursor.fetchall() if cursor.description is not None else []

    async def row(self, sql: str, params: Sequence[object] = ()) -> Row | None:
        cursor = await self._result(sql, params)
        return await cursor.fetchone() if cursor.description is not None else None

    async def run(self, sql: str, params: Sequence[object] = ()) -> int:
        return (await self._result(sql, params)).rowcount

    async def queue(self, sql: str, params: Sequence[object] = ()) -> None:
        await self._conn.execute(*_native(sql, params))

    async def last(self, sql: str, params: Sequence[object] = ()) -> int:
        if self._pipeline is None:  # pragma: no cover - writes are pipelined
            return await self.run(sql, params)
        cursor = await self._conn.execute(*_native(sql, params))
        await self._conn.execute("COMMIT")
        await self._pipeline.sync()
        self.committed = True
        return cursor.rowcount

    async def run_many(self, sql: str, params: Sequence[Sequence[object]]) -> None:
        if self._pipeline is None:
            async with self._conn.cursor() as cursor:
                await cursor.executemany(_placeholders(sql), params)
            return
        # psycopg's executemany would sync the pipeline (a round trip of its own): queue
        # statements instead, an INSERT's rows as one statement per chunk.
        values = _VALUES.fullmatch(sql)
        if values is None:
            for row in params:
                await self._conn.execute(_placeholders(sql), row)
            return
        head, group, tail = values.groups()
        size = max(1, _MAX_PARAMETERS // max(1, len(group.split(","))))
        for start in range(0, len(params), size):
            chunk = params[start : start + size]
            statement = head + ", ".join([group] * len(chunk)) + tail
            await self._conn.execute(
                _placeholders(statement), [value for row in chunk for value in row]
            )


class PostgresDialect(Dialect):
    """PostgreSQL's side of `SQLStore`: a pool, row locks, ``timestamptz``."""

    name = "postgres"
    lock = " FOR UPDATE"

    def __init__(self, pool: AsyncConnectionPool[Conn]) -> None:
        self._pool = pool

    @asynccontextmanager
    async def write(self) -> AsyncIterator[_Session]:
        # BEGIN and COMMIT are queued in the pipeline by hand: psycopg's transaction block
        # syncs before and after its COMMIT, two round trips more per write.
        try:
            async with self._pool.connection() as conn:
                try:
                    async with conn.pipeline() as pipeline:
                        await conn.execute("BEGIN")
                        session = _Session(conn, pipeline)
                        yield session
                        if not session.committed:
                            await conn.execute("COMMIT")
                except BaseException as exc:
                    if not isinstance(exc, Exception) or conn.pgconn.pipeline_status:
                        # Cancelled mid-protocol (psycopg can be cancelled inside its pipeline's
                        # entry and leave the connection in pipeline mode, where every later
                        # read would come back empty): the connection is ended, synchronously,
                        # so the pool discards it; the server rolls the transaction back.
                        conn.pgconn.finish()
                    elif not conn.closed and conn.info.transaction_status != TransactionStatus.IDLE:
                        with suppress(psycopg.Error):  # else the pool discards the connection
                            await conn.rollback()  # what the failed block queued is undone
                    raise
        except WorkingMemoryError:
            raise
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL failed: {exc}") from exc

    @asynccontextmanager
    async def read(self) -> AsyncIterator[_Session]:
        # Outside a transaction block: a statement is one round trip. A read of two statements
        # (a thread row, then its rows by primary key) is as consistent as in a READ COMMITTED
        # transaction, where each statement takes a new snapshot too.
        try:
            async with self._pool.connection() as conn:
                yield _Session(conn)
        except WorkingMemoryError:
            raise
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL failed: {exc}") from exc

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[_Session]:
        # REPEATABLE READ: every statement sees the snapshot of the first (a read-only
        # transaction never fails to serialize).
        async with self.write() as session:
            await session.run("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield session

    def stamp(self, moment: datetime) -> object:
        return moment

    def moment(self, value: Any) -> datetime:
        if not isinstance(value, datetime):  # pragma: no cover - timestamptz columns only
            raise StoreError(f"PostgreSQL returned {value!r} for a timestamp")
        return value

    async def read_tail(self, read: TailRead) -> tuple[Row, list[Row]] | None:
        # One statement, one round trip, outside a transaction block (its own snapshot).
        scan = read.limit
        if read.tokens is not None:
            scan = min(read.limit, read.tokens // _SCAN_TOKENS_PER_TURN + 32)
        params = {
            "tenant_id": read.tenant_id,
            "thread_id": read.thread_id,
            "before_seq": read.before_seq,
            "tokenizer": read.tokenizer_key,
            "tokens": read.tokens,
            "limit": read.limit,
            "scan": scan,
        }
        try:
            async with self._pool.connection() as conn:
                cursor = await conn.execute(_TAIL, params)
                rows = await cursor.fetchall()
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL failed: {exc}") from exc
        if not rows:
            return None
        return rows[0][:9], [row[9:] for row in rows[1:]]

    async def migrate(self) -> None:
        for migration in load_migrations("postgres"):
            async with self.write() as session:
                await session.run("SELECT pg_advisory_xact_lock(?)", (_MIGRATION_LOCK,))
                await session.run(
                    "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
                    "name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
                )
                if await session.row(
                    "SELECT 1 FROM schema_migrations WHERE version = ?", (migration.version,)
                ):
                    continue
                for statement in migration.statements:
                    await session.run(statement)
                await session.run(
                    "INSERT INTO schema_migrations (version, name) VALUES (?, ?)",
                    (migration.version, migration.name),
                )

    async def aclose(self) -> None:
        await self._pool.close()


class PostgresStore(SQLStore):
    """The `SQLStore` on PostgreSQL."""

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
        dialect = PostgresDialect(pool)
        try:
            await dialect.migrate()
        except BaseException:
            await pool.close()
            raise
        return cls(dialect)
