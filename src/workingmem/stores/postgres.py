"""The PostgreSQL store: many workers on many machines share one database.

    store = await PostgresStore.open("postgresql://app@db:5432/memory")

psycopg 3 (async) with a connection pool; needs the ``postgres`` extra. A write locks the rows
it reads (``SELECT ... FOR UPDATE``): appends to one thread are serialized on the thread's row,
so two workers never give two turns the same seq; state writes are compare-and-set on the
state's version. Reads of one statement run outside a transaction block: one round trip.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from datetime import datetime
from typing import Any

from ..errors import StoreError, WorkingMemoryError
from ._dialect import Dialect, KnownAppend, Row, Session, TailRead, TurnSearch
from ._postgres_sql import (
    APPENDS,
    INDEX,
    OPEN,
    SEARCH,
    TAIL,
    Params,
    batched,
    json_rows,
    known_params,
    native,
    placeholders,
    tail_params,
    tail_rows,
)
from .migrations import load_migrations
from .sql import SQLStore

try:
    import psycopg
    from psycopg import AsyncPipeline
    from psycopg.pq import ExecStatus, TransactionStatus
    from psycopg_pool import AsyncConnectionPool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "the PostgreSQL store needs the postgres extra: pip install 'workingmem[postgres]'"
    ) from exc

__all__ = ["PostgresStore"]

_MIGRATION_LOCK = 0x776D656D  # "wmem": one migrator at a time across workers

Conn = psycopg.AsyncConnection[tuple[Any, ...]]


def _has_rows(cursor: psycopg.AsyncCursor[Row]) -> bool:
    """Whether the statement returned rows (a SELECT, a RETURNING), as psycopg's own fetch
    checks it: ``description`` would say so too, at the cost of building its columns."""
    result = cursor.pgresult
    return result is not None and result.status == ExecStatus.TUPLES_OK


def _end_if_mid_protocol(conn: Conn, exc: BaseException) -> bool:
    """Ends a connection left inside its pipeline's protocol, and says so. psycopg can be
    cancelled inside a pipeline's entry or exit and leave the connection in pipeline mode,
    where every later read would come back empty: it is ended, synchronously, so the pool
    discards it; the server rolls its transaction back."""
    if isinstance(exc, Exception) and not conn.pgconn.pipeline_status:
        return False
    conn.pgconn.finish()
    return True


class _Session:
    """Statements on one pooled connection. In a write the connection is in pipeline mode:
    what is queued (its BEGIN, the writes whose result nobody reads, the COMMIT) is sent with
    the next statement that is read, or at the end, so an append is two round trips."""

    def __init__(self, conn: Conn, pipeline: AsyncPipeline | None = None) -> None:
        self._conn = conn
        self._pipeline = pipeline
        self.committed = False

    async def _result(self, sql: str, params: Params) -> psycopg.AsyncCursor[Row]:
        cursor = await self._conn.execute(*native(sql, params))
        if self._pipeline is not None:
            await self._pipeline.sync()  # the round trip: this result, and all queued before it
        return cursor

    async def together(self, *statements: tuple[str, Params]) -> list[psycopg.AsyncCursor[Row]]:
        """Statements outside a transaction block sent in one pipeline, one round trip: one
        implicit transaction, each statement after the one before; their cursors."""
        try:
            async with self._conn.pipeline():
                return [await self._conn.execute(*native(*statement)) for statement in statements]
        except BaseException as exc:
            _end_if_mid_protocol(self._conn, exc)
            raise

    async def rows(self, sql: str, params: Params = ()) -> list[Row]:
        cursor = await self._result(sql, params)
        return await cursor.fetchall() if _has_rows(cursor) else []

    async def row(self, sql: str, params: Sequence[object] = ()) -> Row | None:
        cursor = await self._result(sql, params)
        return await cursor.fetchone() if _has_rows(cursor) else None

    async def run(self, sql: str, params: Sequence[object] = ()) -> int:
        return (await self._result(sql, params)).rowcount

    async def queue(self, sql: str, params: Sequence[object] = ()) -> None:
        await self._conn.execute(*native(sql, params))

    async def last(self, sql: str, params: Sequence[object] = ()) -> int:
        if self._pipeline is None:  # pragma: no cover - writes are pipelined
            return await self.run(sql, params)
        cursor = await self._conn.execute(*native(sql, params))
        await self._conn.execute("COMMIT")
        await self._pipeline.sync()
        self.committed = True
        return cursor.rowcount

    async def run_many(self, sql: str, params: Sequence[Sequence[object]]) -> None:
        if self._pipeline is None:
            async with self._conn.cursor() as cursor:
                await cursor.executemany(placeholders(sql), params)
            return
        # psycopg's executemany would sync the pipeline (a round trip of its own): queue
        # statements instead, an INSERT's rows as one statement.
        insert = batched(sql)
        if insert is None:
            for row in params:
                await self._conn.execute(placeholders(sql), row)
            return
        await self._conn.execute(insert, [json_rows(params)])


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
                    idle = conn.closed or conn.info.transaction_status == TransactionStatus.IDLE
                    if not _end_if_mid_protocol(conn, exc) and not idle:
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
        return tail_rows(await self._statement(TAIL, tail_params(read)))

    async def claim_and_read_tail(
        self,
        claim: tuple[str, Sequence[object]],
        read: TailRead,
        opening: KnownAppend | None = None,
    ) -> tuple[bool, tuple[Row, list[Row]] | None, int | None]:
        # The read after the lock, in its own snapshot (READ COMMITTED): it sees what was
        # committed before the lock was taken, a wait for it included. The opening after
        # the read: its own guards (the lock is its owner's, the thread has no turns) keep
        # it from writing anywhere else.
        statements: list[tuple[str, Params]] = [claim, (TAIL, tail_params(read))]
        if opening is not None:
            assert opening.held is not None, "written under the lock"
            statements.append((OPEN, known_params(opening)))
        async with self.read() as session:
            claimed, tail, *opened = await session.together(*statements)
            if claimed.rowcount != 1:
                return False, None, None
            found = tail_rows(await tail.fetchall())
            based = await opened[0].fetchall() if opened else []
            return True, found, int(based[0][0]) if based else None

    async def search_hits(self, session: Session, search: TurnSearch) -> list[int]:
        # The turns in the search's range that have no vector yet get theirs first, in the
        # same trip and implicit transaction. The search's statement takes its snapshot after
        # that (READ COMMITTED), so it sees them, and those of a concurrent search that this
        # one's update waited for.
        assert isinstance(session, _Session), "a session of this dialect"
        _, found = await session.together(
            (INDEX, (search.thread_pk, search.before_seq)), self.search(search)
        )
        return [hit[0] for hit in await found.fetchall()]

    def search(self, search: TurnSearch) -> tuple[str, Sequence[object]]:
        return SEARCH, (
            " ".join(search.terms),
            search.thread_pk,
            search.before_seq,
            float(search.before_seq - 1),
            search.limit,
        )

    async def append_known(self, write: KnownAppend) -> int | None:
        rows = await self._statement(
            APPENDS[write.create, write.release is not None], known_params(write)
        )
        return int(rows[0][0]) if rows else None

    async def _statement(self, sql: str, params: dict[str, Any]) -> list[Row]:
        """One statement outside a transaction block: one round trip, atomic on its own."""
        async with self.read() as session:
            return await session.rows(sql, params)

    async def write_one(self, sql: str, params: Sequence[object] = ()) -> int:
        # Outside a transaction block: one round trip, where a pipelined BEGIN ... COMMIT
        # costs psycopg twice the work of the statement.
        async with self.read() as session:
            return await session.run(sql, params)

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

    def pool_stats(self) -> dict[str, int]:
        return self._pool.get_stats()

    async def aclose(self) -> None:
        await self._pool.close()


async def _configure(conn: Conn) -> None:
    # The store's statements are prepared after a few runs (psycopg); their plans should not
    # depend on the values: each is bounded by its keys (the tail read by seq), and with fresh
    # statistics the server otherwise plans the tail read again on every run (custom plans),
    # which costs more than running it.
    await conn.execute("SET plan_cache_mode = force_generic_plan")


class PostgresStore(SQLStore):
    """The `SQLStore` on PostgreSQL."""

    @classmethod
    async def open(cls, url: str, *, min_size: int = 1, max_size: int = 10) -> PostgresStore:
        """Connects a pool to `url` and migrates the schema."""
        # Autocommit: a single-statement read is one round trip; writes open their own
        # transaction blocks.
        pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            open=False,
            kwargs={"autocommit": True},
            configure=_configure,
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

    def pool_stats(self) -> dict[str, int]:
        """`PooledStore.pool_stats`: psycopg_pool's own figures."""
        assert isinstance(self._dialect, PostgresDialect)
        return self._dialect.pool_stats()
