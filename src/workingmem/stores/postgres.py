"""The PostgreSQL store: many workers on many machines share one database.

    store = await PostgresStore.open("postgresql://app@db:5432/memory")

psycopg 3 (async) with a connection pool; needs the ``postgres`` extra. A write locks the rows
it reads (``SELECT ... FOR UPDATE``): appends to one thread are serialized on the thread's row,
so two workers never give two turns the same seq; state writes are compare-and-set on the
state's version. Reads of one statement run outside a transaction block: one round trip.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from datetime import datetime
from functools import lru_cache
from typing import Any

from ..errors import StoreError, WorkingMemoryError
from . import _rows
from ._dialect import UNCOUNTED_PAGE, Dialect, KnownAppend, Row, Session, TailRead, TurnSearch
from ._sql_reads import STATE_COLUMNS_OF_S, THREAD_COLUMNS_OF_TH
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
_SEARCH = """
WITH terms AS (
    SELECT DISTINCT lexeme FROM unnest(to_tsvector('english'::regconfig, ?))
), matched AS (
    SELECT t.seq, w.lexeme, length(t.search)::float8 AS words,
           coalesce(array_length(w.positions, 1), 1)::float8 AS tf
    FROM turns AS t CROSS JOIN LATERAL unnest(t.search) AS w
    WHERE t.thread_pk = ? AND t.seq < ?
      AND t.search @@ (SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery FROM terms)
      AND w.lexeme IN (SELECT lexeme FROM terms)
), df AS (
    SELECT lexeme, count(*)::float8 AS n FROM matched GROUP BY lexeme
), mean AS (
    SELECT greatest(avg(words), 1.0) AS words FROM matched
)
SELECT m.seq FROM matched AS m JOIN df USING (lexeme) CROSS JOIN mean
GROUP BY m.seq
ORDER BY sum(
    ln(1.0 + (? - df.n + 0.5) / (df.n + 0.5))
    * m.tf * 2.2 / (m.tf + 1.2 * (0.25 + 0.75 * m.words / mean.words))
) DESC, m.seq DESC
LIMIT ?
"""
"""A thread's turns by BM25 (k1 1.2, b 0.75) over the tsvector's lexemes (migration 0010):
one scan of the GIN index finds the turns that hold any of the words, and each found turn's
lexemes are read once, for the words' counts in it (a scan and a lexeme lookup per word cost
1.5-7x as much, the most on a table without statistics yet). A word's rarity is counted among
the thread's turns searched, a turn's length in lexemes against the matched turns' mean."""
_INDEX = (
    "UPDATE turns SET search = to_tsvector('english'::regconfig, workingmem_turn_words(message)) "
    "WHERE thread_pk = ? AND seq < ? AND search IS NULL"
)
"""The vectors of the turns a search reaches that have none yet (migration 0012)."""
_STATE_COLUMNS = [column.removeprefix("s.") for column in STATE_COLUMNS_OF_S.split(", ")]
_TAIL_COLUMNS = [
    *(column.removeprefix("th.") for column in THREAD_COLUMNS_OF_TH.split(", ")),
    *(f"state_{column}" for column in _STATE_COLUMNS),
]
"""The thread's columns as `_TAIL` reads them (`th`: the thread row and its memory state), in
the order of the row `Dialect.read_tail` returns."""
_STATE_AS_TH = ", ".join(f"s.{column} AS state_{column}" for column in _STATE_COLUMNS)
_TAIL_THREAD = ", ".join(f"th.{column}" for column in _TAIL_COLUMNS)
_TAIL_MOMENTS = tuple(i for i, column in enumerate(_TAIL_COLUMNS) if column.endswith("_at"))
"""The timestamps among them, which travel in JSON as ISO 8601 text."""
_TAIL = f"""
WITH th AS (SELECT {THREAD_COLUMNS_OF_TH}, {_STATE_AS_TH}
            FROM threads AS th LEFT JOIN memory_states AS s ON s.thread_pk = th.id
            WHERE th.tenant_id = %(tenant_id)s AND th.thread_id = %(thread_id)s),
top AS (SELECT id AS pk, least(turn_count, coalesce(%(before_seq)s::bigint - 1, turn_count)) AS seq,
               coalesce(tokenizers::json ->> 0 = %(tokenizer)s, false) AS own
        FROM th),
reach AS (SELECT (SELECT u.tokens_through FROM turns AS u WHERE u.thread_pk = top.pk
                   AND u.seq = top.seq) - %(tokens)s::bigint AS goal
          FROM top WHERE top.own),
passed AS (
  SELECT u.unit_seq FROM turns AS u
  WHERE u.thread_pk = (SELECT pk FROM top) AND u.tokens_through >= (SELECT goal FROM reach)
    AND u.seq <= (SELECT seq FROM top)
  ORDER BY u.tokens_through, u.seq LIMIT 1),
scan AS (
  SELECT u.seq, u.unit_seq, CASE WHEN (SELECT own FROM top) THEN u.tokens
    ELSE (SELECT k.tokens FROM turn_tokens AS k WHERE k.thread_pk = u.thread_pk
          AND k.tokenizer = %(tokenizer)s AND k.seq = u.seq) END AS tokens
  FROM turns AS u
  WHERE %(tokens)s::bigint IS NOT NULL AND (SELECT goal FROM reach) IS NULL
    AND u.thread_pk = (SELECT pk FROM top)
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
                     WHEN (SELECT goal FROM reach) IS NOT NULL
                     THEN coalesce((SELECT unit_seq FROM passed), top.seq + 1)
                     ELSE coalesce(stop.passed, stop.uncounted, stop.scanned, top.seq + 1) END
                AS first
         FROM top, stop)
SELECT NULL::integer AS seq, NULL::integer, json_build_array({_TAIL_THREAD})::text, NULL::integer
FROM th
UNION ALL
SELECT t.seq, t.unit_seq, t.message,
       CASE WHEN (SELECT own FROM top) THEN t.tokens
         ELSE (SELECT k.tokens FROM turn_tokens AS k WHERE k.thread_pk = t.thread_pk
               AND k.tokenizer = %(tokenizer)s AND k.seq = t.seq) END
FROM (SELECT u.thread_pk, u.seq, u.unit_seq, u.message, u.tokens FROM turns AS u
      WHERE u.thread_pk = (SELECT pk FROM top) AND u.seq <= (SELECT seq FROM top)
        AND u.seq >= (SELECT first FROM span)
      ORDER BY u.seq DESC LIMIT %(limit)s) AS t
ORDER BY seq DESC NULLS FIRST
"""
"""The thread row with its memory state, then its newest turns, in one statement: the thread's
columns once, as a JSON array in the message column of the first row, so that a turn's row
holds its four columns and no empty ones (14 empty ones a row cost the server and the driver
about a third more than the turns' own). With a token goal the turns are read from the head of
the unit of the first turn that passes the goal (a window takes units whole). With the thread's
own tokenizer, and every turn counted, that turn is found in one probe of the running counts'
index (migration 13: the oldest whose running count is at least the newest's less the goal);
else the newest counts (another tokenizer's, or some not made yet) are summed newest first
over a bounded scan (bounded by seq, not only by LIMIT, so that no plan reads the whole thread
when the statistics are stale), where a turn not counted yet leaves the goal undecided and
`UNCOUNTED_PAGE` turns from it are read for the caller to count."""
_MOVE_ON = """
  UPDATE threads SET turn_count = turn_count + %(count)s,
                     last_unit_seq = turn_count + %(last_unit)s, updated_at = %(now)s,
                     tokens_through = tokens_through + %(total)s::bigint
  WHERE tenant_id = %(tenant_id)s AND thread_id = %(thread_id)s
    AND turn_count = %(turn_count)s AND tokenizers = %(tokenizers)s"""
_WRITE_TURNS = """
own AS (
  INSERT INTO turns (thread_pk, seq, unit_seq, role, user_id, message, created_at, format, item,
                     tokens, tokens_through)
  SELECT th.id, th.base + (v->>0)::integer, th.base + (v->>1)::integer, v->>2, %(user_id)s::text,
         v->>3, %(now)s, v->>4, v->>5, (v->>6)::integer, th.before + (v->>7)::bigint
  FROM th, jsonb_array_elements(%(turns)s::jsonb) AS v),
others AS (
  INSERT INTO turn_tokens (thread_pk, tokenizer, seq, tokens)
  SELECT th.id, o->>0, th.base + (o->>1)::integer, (o->>2)::integer
  FROM th, jsonb_array_elements(%(others)s::jsonb) AS o)"""
"""The turns, and the other tokenizers' counts, each a JSON array of rows (`_json_rows`)."""
_RELEASE = """,
released AS (
  DELETE FROM thread_locks WHERE tenant_id = %(tenant_id)s AND thread_id = %(thread_id)s
    AND owner = %(release)s AND EXISTS (SELECT FROM th))"""
"""`KnownAppend.release`: the ask lock given back when the turns are written."""
_APPEND_KNOWN = f"""
WITH th AS ({_MOVE_ON}
  RETURNING id, turn_count - %(count)s AS base, tokens_through - %(total)s::bigint AS before),
{_WRITE_TURNS}"""
"""`PostgresDialect.append_known`: the thread's row locked and moved on by its UPDATE (a
concurrent writer waits, then this one finds the row it left, and writes nothing when the turn
count it expects is gone), the turns numbered after it, in one statement: atomic on its own,
one round trip."""


def _create_and_append(held: str = "TRUE") -> str:
    """`_APPEND_KNOWN` for a thread last seen missing or empty: the thread made with its turns,
    or, when it exists, moved on as there (an empty one), in one statement; both only where
    `held` (a condition) is true. A thread another writer made after this statement's
    snapshot is neither made nor moved: nothing is written."""
    return f"""
WITH made AS (
  INSERT INTO threads (tenant_id, thread_id, user_id, created_at, updated_at, tokenizers,
                       turn_count, last_unit_seq, tokens_through)
  SELECT %(tenant_id)s, %(thread_id)s, %(user_id)s, %(now)s, %(now)s, %(tokenizers)s,
         %(count)s, %(last_unit)s, %(total)s::bigint
  WHERE {held}
  ON CONFLICT (tenant_id, thread_id) DO NOTHING
  RETURNING id, 0 AS base, 0::bigint AS before),
moved AS ({_MOVE_ON} AND NOT EXISTS (SELECT FROM made) AND {held}
  RETURNING id, turn_count - %(count)s AS base, tokens_through - %(total)s::bigint AS before),
th AS (SELECT id, base, before FROM made UNION ALL SELECT id, base, before FROM moved),
{_WRITE_TURNS}"""


_CREATE_AND_APPEND = _create_and_append()
_APPENDS = {
    (create, release): (_CREATE_AND_APPEND if create else _APPEND_KNOWN)
    + (_RELEASE if release else "")
    + "\nSELECT base FROM th"
    for create in (False, True)
    for release in (False, True)
}
"""The statement of a `KnownAppend`, by whether it creates the thread and releases a lock."""
_OPEN = (
    _create_and_append(
        "EXISTS (SELECT FROM thread_locks WHERE tenant_id = %(tenant_id)s"
        " AND thread_id = %(thread_id)s AND owner = %(held)s)"
    )
    + "\nSELECT base FROM th"
)
"""An ask lock's opening (`Dialect.claim_and_read_tail`): a thread's first turns, written by
the ask that holds its lock (`KnownAppend.held`), in the lock's own pipeline: when the claim
failed, the lock's row is another's and nothing is written."""
_SCAN_TOKENS_PER_TURN = 20
"""The token goal's count scan is bounded at goal / this + 32 turns (LoCoMo turns average 35;
a thread of shorter turns costs one more read, never a wrong window)."""

Conn = psycopg.AsyncConnection[tuple[Any, ...]]


@lru_cache(maxsize=256)
def _placeholders(sql: str) -> str:
    return sql.replace("?", "%s")


_INSERT = re.compile(r"INSERT INTO (\w+) \(([\w, ]+)\) VALUES \(([?, ]+)\)(.*)", re.DOTALL)
"""An INSERT of one row of parameters: its rows can travel as one statement of JSON."""
_COLUMN_TYPES = {
    "thread_pk": "bigint",
    "created_at": "timestamptz",
    "tokens_through": "bigint",
} | dict.fromkeys(("seq", "unit_seq", "tokens", "version", "turn_count"), "integer")
"""The type of a batched column (any other is text)."""


@lru_cache(maxsize=64)
def _batched(sql: str) -> str | None:
    """An INSERT of one row as the INSERT of many from a JSON array of rows (`_json_rows`):
    one statement whose text does not grow with its rows, so the server parses it once and
    psycopg adapts one text instead of thousands of parameters; None for another statement."""
    found = _INSERT.fullmatch(sql)
    if found is None:
        return None
    table, columns, _, tail = found.groups()
    values = ", ".join(
        _element(index, _COLUMN_TYPES.get(column.strip()))
        for index, column in enumerate(columns.split(","))
    )
    return (
        f"INSERT INTO {table} ({columns}) SELECT {values} "
        f"FROM jsonb_array_elements(%s::jsonb) AS v{tail}"
    )


def _element(index: int, type_: str | None) -> str:
    """Column `index` of a row of `_json_rows`, as `type_` (None: text)."""
    return f"(v->>{index})::{type_}" if type_ else f"v->>{index}"


def _json_rows(rows: Iterable[Sequence[object]]) -> str:
    """Rows of parameters as one JSON array, a parameter whose adaptation costs psycopg one
    text: an array a column cost it 26 µs a statement of appended turns (6 µs for the whole
    statement now). Read as ``jsonb``, parsed once: a ``json`` value is parsed again by every
    ``->>`` (a batch of 100 turns took 4.1 ms, as against 3.4 with arrays and with ``jsonb``).
    Timestamps travel in ISO 8601, as PostgreSQL reads them."""
    return json.dumps(list(rows), ensure_ascii=False, default=_iso)


def _iso(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"not a parameter of a batched row: {value!r}")  # pragma: no cover


Params = Sequence[object] | Mapping[str, object]
"""A statement's parameters: for ``?`` placeholders, or by name for psycopg's own
``%(name)s`` (this module's own statements)."""


def _native(sql: str, params: Params) -> tuple[str, Params | None]:
    """The store's ``?`` placeholders as psycopg's ``%s`` (its statements with parameters
    have no other ``?`` or ``%``); a statement without parameters, or with named ones, is
    sent as it is."""
    if not params:
        return sql, None
    if isinstance(params, Mapping):
        return sql, params
    return _placeholders(sql), params


def _tail_params(read: TailRead) -> dict[str, object]:
    """`_TAIL`'s parameters for `read`."""
    scan = read.limit
    if read.tokens is not None:
        scan = min(read.limit, read.tokens // _SCAN_TOKENS_PER_TURN + 32)
    return {
        "tenant_id": read.tenant_id,
        "thread_id": read.thread_id,
        "before_seq": read.before_seq,
        "tokenizer": read.tokenizer_key,
        "tokens": read.tokens,
        "limit": read.limit,
        "scan": scan,
    }


def _tail(rows: list[Row]) -> tuple[Row, list[Row]] | None:
    """`_TAIL`'s rows as `Dialect.read_tail` returns them: the thread's row from its JSON
    array (its timestamps in ISO 8601, as PostgreSQL writes them in JSON), then the turns'."""
    if not rows:
        return None
    thread: list[Any] = json.loads(rows[0][2])
    for index in _TAIL_MOMENTS:
        if thread[index] is not None:
            thread[index] = datetime.fromisoformat(thread[index])
    return tuple(thread), rows[1:]


def _known_params(write: KnownAppend) -> dict[str, Any]:
    """The parameters of `write`'s statement (`_APPENDS`, `_OPEN`): its turns, each with its
    running count, and the other tokenizers' counts, as JSON arrays of rows."""
    through, total = _rows.running_counts([turn[6] for turn in write.turns])
    return {
        "tenant_id": write.tenant_id,
        "thread_id": write.thread_id,
        "turn_count": write.turn_count,
        "tokenizers": write.tokenizers,
        "user_id": write.user_id,
        "now": write.stamp,
        "count": len(write.turns),
        "last_unit": write.turns[-1][1],
        "release": write.release,
        "held": write.held,
        "total": total,
        "turns": _json_rows(
            (*turn, count) for turn, count in zip(write.turns, through, strict=True)
        ),
        "others": _json_rows(write.others),
    }


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
        cursor = await self._conn.execute(*_native(sql, params))
        if self._pipeline is not None:
            await self._pipeline.sync()  # the round trip: this result, and all queued before it
        return cursor

    async def together(self, *statements: tuple[str, Params]) -> list[psycopg.AsyncCursor[Row]]:
        """Statements outside a transaction block sent in one pipeline, one round trip: one
        implicit transaction, each statement after the one before; their cursors."""
        try:
            async with self._conn.pipeline():
                return [await self._conn.execute(*_native(*statement)) for statement in statements]
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
        # statements instead, an INSERT's rows as one statement.
        batched = _batched(sql)
        if batched is None:
            for row in params:
                await self._conn.execute(_placeholders(sql), row)
            return
        await self._conn.execute(batched, [_json_rows(params)])


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
        return _tail(await self._statement(_TAIL, _tail_params(read)))

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
        statements: list[tuple[str, Params]] = [claim, (_TAIL, _tail_params(read))]
        if opening is not None:
            assert opening.held is not None, "written under the lock"
            statements.append((_OPEN, _known_params(opening)))
        async with self.read() as session:
            claimed, tail, *opened = await session.together(*statements)
            if claimed.rowcount != 1:
                return False, None, None
            found = _tail(await tail.fetchall())
            based = await opened[0].fetchall() if opened else []
            return True, found, int(based[0][0]) if based else None

    async def search_hits(self, session: Session, search: TurnSearch) -> list[int]:
        # The turns in the search's range that have no vector yet get theirs first, in the
        # same trip and implicit transaction. The search's statement takes its snapshot after
        # that (READ COMMITTED), so it sees them, and those of a concurrent search that this
        # one's update waited for.
        assert isinstance(session, _Session), "a session of this dialect"
        _, found = await session.together(
            (_INDEX, (search.thread_pk, search.before_seq)), self.search(search)
        )
        return [hit[0] for hit in await found.fetchall()]

    def search(self, search: TurnSearch) -> tuple[str, Sequence[object]]:
        return _SEARCH, (
            " ".join(search.terms),
            search.thread_pk,
            search.before_seq,
            float(search.before_seq - 1),
            search.limit,
        )

    async def append_known(self, write: KnownAppend) -> int | None:
        rows = await self._statement(
            _APPENDS[write.create, write.release is not None], _known_params(write)
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
