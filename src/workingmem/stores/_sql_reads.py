"""Reading threads and turns, and the token counts a read makes: the SQL, written once.

`SQLThreads` (the writes) builds on these methods, and `SQLStore` inherits both. A tail read
counts the turns not counted yet with the model's tokenizer and writes the counts back in one
trip (`_remember_counts`), so the next read of the thread counts nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import UTC

from ..errors import NotFoundError, ValidationError
from ..messages import check_id
from ..tokens import Tokenizer
from ..types import CHAT_FORMAT, CHAT_ORIGINAL_KEY, Thread, Turn, WorkingMemoryState
from . import _rows, _search
from ._dialect import Dialect, Row, Session, TailRead, TurnSearch
from ._known import KnownThreads
from .base import Tail

__all__ = [
    "SELECT_THREAD",
    "STATE_COLUMNS_OF_S",
    "THREAD_COLUMNS",
    "THREAD_COLUMNS_OF_TH",
    "TURN_COLUMNS",
    "SQLReads",
    "chat_original_column",
    "tail_columns",
    "thread_of",
    "thread_row",
]

THREAD_COLUMNS = (
    "id, tenant_id, thread_id, user_id, turn_count, last_unit_seq, tokenizers, created_at, "
    "updated_at"
)
"""The thread row every query reads, in this order (the tail query too, as ``th.``...)."""
THREAD_COLUMNS_OF_TH = ", ".join("th." + column.strip() for column in THREAD_COLUMNS.split(","))
"""`THREAD_COLUMNS` of the table aliased ``th``."""
STATE_COLUMNS_OF_S = "s.version, s.summary, s.facts, s.turn_count, s.updated_at"
"""A memory state as `_rows.state_of` reads it, of ``memory_states`` aliased ``s``."""
CHAT_ORIGINAL_START = json.dumps({CHAT_ORIGINAL_KEY: None}, separators=(",", ":"))[:-5]
"""How an item that carries a chat original (`CHAT_ORIGINAL_KEY`, its first key) starts."""


def tail_columns(alias: str, tokens: str, extracted: str) -> str:
    """A tail row's columns after (seq, unit_seq), of the turns aliased `alias` (``t.``, or
    ""): the message a window reads (its large files named when it has them: migration 16),
    its count (`tokens`, the caller's SQL), `chat_original_column` and the bytes of the files
    left in the store (`CountedTurn.held`)."""
    return (
        f"coalesce({alias}shed, {alias}message), {tokens}, "
        f"{chat_original_column(extracted, alias)}, {alias}shed_bytes"
    )


def chat_original_column(extracted: str, alias: str = "") -> str:
    """A tail row's original (`CountedTurn.original`): the item of a turn stored in chat's own
    format, the chat original an item of another format carries (`extracted`: the SQL that
    takes it out of ``item``), else NULL, and NULL for a turn whose large files a window
    leaves in the store (its item holds them too). The start of an item tells, without
    parsing it."""
    item = f"{alias}item"
    return (
        f"CASE WHEN {item} IS NULL OR {alias}shed IS NOT NULL THEN NULL "
        f"WHEN {alias}format = '{CHAT_FORMAT}' THEN {item} "
        f"WHEN substr({item}, 1, {len(CHAT_ORIGINAL_START)}) = '{CHAT_ORIGINAL_START}' "
        f"THEN {extracted} END"
    )


SELECT_THREAD = f"SELECT {THREAD_COLUMNS} FROM threads WHERE tenant_id = ? AND thread_id = ?"
"""A thread's row by its ids."""
TURN_COLUMNS = "seq, message, created_at, format, item"
"""A turn as `_turn` reads it back."""
_LIST_TURNS = (
    f"SELECT {TURN_COLUMNS} FROM turns WHERE thread_pk = "
    "(SELECT id FROM threads WHERE tenant_id = ? AND thread_id = ?) AND seq > ? AND seq <= ? "
    "ORDER BY seq LIMIT ?"
)
"""A page of a thread's turns in one statement, the thread found by its ids. Its seqs are
bounded as well as counted (a thread's seqs run from 1 without a gap), so that no plan reads
the whole thread when the statistics are stale."""
_COUNTED = (
    "WITH v (seq, tokens) AS ({values}), "
    "b AS (SELECT CASE WHEN ? = 0 THEN 0 ELSE (SELECT tokens_through FROM turns "
    "WHERE thread_pk = ? AND seq = ?) END AS base), "
    "c AS (SELECT t.seq, t.tokens FROM turns AS t "
    "WHERE t.thread_pk = ? AND t.seq > ? AND t.seq NOT IN (SELECT seq FROM v) "
    "UNION ALL SELECT t.seq, coalesce(t.tokens, v.tokens) FROM v "
    "JOIN turns AS t ON t.thread_pk = ? AND t.seq = v.seq), "
    "x AS (SELECT c.seq, c.tokens, b.base + sum(c.tokens) OVER w AS through, "
    "sum(CASE WHEN c.tokens IS NULL THEN 1 ELSE 0 END) OVER w AS gaps "
    "FROM c, b WINDOW w AS (ORDER BY c.seq)) "
    "UPDATE turns SET tokens = x.tokens, tokens_through = CASE WHEN x.gaps = 0 THEN x.through "
    "ELSE turns.tokens_through END FROM x "
    "WHERE turns.thread_pk = ? AND turns.seq = x.seq AND {guard} "
    "AND (turns.tokens IS NULL AND x.tokens IS NOT NULL OR x.gaps = 0 AND x.through IS NOT NULL "
    "AND (turns.tokens_through IS NULL OR turns.tokens_through <> x.through))"
)
"""A read's counts of a thread's own tokenizer (a ``VALUES`` list of (seq, tokens), `_values`)
written into the turns not counted yet, with the running counts (migration 12) of the turns
after seq `after` summed on from that turn's, through the first turn not counted, in one
UPDATE: each row is written once, where an UPDATE of the running counts after the counts' wrote
every row twice (the first read of 1,000 turns never counted, PostgreSQL: 43 -> 31 ms). The
list is looked up from the turns' side (``NOT IN``, a join on the primary key): SQLite scans a
``VALUES`` list for every row that joins it. Its parameters: the list's, (after, pk, after, pk,
after, pk, pk), the guard's."""
_THREAD_THROUGH = (
    "UPDATE threads SET tokens_through = CASE WHEN turn_count = 0 THEN 0 ELSE (SELECT "
    "t.tokens_through FROM turns AS t WHERE t.thread_pk = threads.id AND t.seq = threads.turn_count"
    ") END WHERE id = ?"
)
"""The thread's running count: its newest turn's (pk)."""


def thread_of(row: Row, dialect: Dialect) -> Thread:
    """A thread's row (`THREAD_COLUMNS`) as a `Thread`."""
    return Thread(
        tenant_id=row[1],
        thread_id=row[2],
        user_id=row[3],
        turn_count=row[4],
        created_at=dialect.moment(row[7]),
        updated_at=dialect.moment(row[8]),
    )


async def thread_row(
    session: Session, dialect: Dialect, tenant_id: str, thread_id: str, *, lock: bool = False
) -> Row:
    """A thread's row (`THREAD_COLUMNS`), locked for the transaction with `lock` where the
    database locks rows; `NotFoundError` for a thread that does not exist."""
    row = await session.row(SELECT_THREAD + (dialect.lock if lock else ""), (tenant_id, thread_id))
    if row is None:
        raise NotFoundError("thread", thread_id)
    return row


class SQLReads:
    """The reads of `SQLStore`'s threads and turns."""

    _dialect: Dialect
    _known: KnownThreads

    def _turn(self, row: Row) -> Turn:
        seq, text, stamp, format, item = row
        return Turn.from_message(
            _rows.loads_message(text),
            seq=seq,
            created_at=self._dialect.moment(stamp),
            format=format,
            item=_rows.loads_item(item),
        )

    async def get_thread(self, *, tenant_id: str, thread_id: str) -> Thread:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        async with self._dialect.read() as session:
            return thread_of(
                await thread_row(session, self._dialect, tenant_id, thread_id), self._dialect
            )

    async def list_threads(
        self, *, tenant_id: str, limit: int = 50, offset: int = 0
    ) -> list[Thread]:
        check_id("tenant_id", tenant_id)
        _rows.check_page(limit, offset)
        async with self._dialect.read() as session:
            rows = await session.rows(
                f"SELECT {THREAD_COLUMNS} FROM threads WHERE tenant_id = ? "
                "ORDER BY updated_at DESC, id DESC LIMIT ? OFFSET ?",
                (tenant_id, limit, offset),
            )
        return [thread_of(row, self._dialect) for row in rows]

    async def list_turns(
        self, *, tenant_id: str, thread_id: str, after_seq: int = 0, limit: int = 100
    ) -> list[Turn]:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        _rows.check_page(limit, 0)
        if after_seq < 0:
            raise ValidationError("after_seq", f"must not be negative, got {after_seq}")
        async with self._dialect.read() as session:
            rows = await session.rows(
                _LIST_TURNS, (tenant_id, thread_id, after_seq, after_seq + limit, limit)
            )
            if not rows:  # no turns there, or no thread: only then is its row read
                await thread_row(session, self._dialect, tenant_id, thread_id)
        return [self._turn(r) for r in rows]

    async def turns_at(self, *, tenant_id: str, thread_id: str, seqs: Sequence[int]) -> list[Turn]:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        wanted = sorted({_rows.check_seq("seqs", seq, minimum=1) for seq in seqs})
        async with self._dialect.read() as session:
            pk = (await thread_row(session, self._dialect, tenant_id, thread_id))[0]
            if not wanted:
                return []
            rows = await session.rows(
                f"SELECT {TURN_COLUMNS} FROM turns WHERE thread_pk = ? "
                f"AND seq IN ({', '.join('?' * len(wanted))}) ORDER BY seq",
                (pk, *wanted),
            )
        return [self._turn(row) for row in rows]

    async def read_tail(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        tokenizer: Tokenizer,
        limit: int,
        before_seq: int | None = None,
        tokens: int | None = None,
    ) -> Tail:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        found = await self._dialect.read_tail(
            TailRead(tokenizer.key, tenant_id, thread_id, limit, before_seq, tokens)
        )
        tail = await self._tail(tenant_id, thread_id, tokenizer, found)
        if tail is None:
            raise NotFoundError("thread", thread_id)
        return tail

    async def _tail(
        self,
        tenant_id: str,
        thread_id: str,
        tokenizer: Tokenizer,
        found: tuple[Row, list[Row]] | None,
    ) -> Tail | None:
        """A tail read's rows as a `Tail`, its missing counts made and remembered; None for
        a missing thread."""
        if found is None:
            # A first append creates it, its turns counted for this tokenizer as they are
            # written, as a read after it would count them.
            self._known.saw(tenant_id, thread_id, 0, json.dumps([tokenizer.key]))
            return None
        row, tail = found
        tail = await self._whole_where_uncounted(row[0], tail)
        turns, missing = _rows.counted_tail(tokenizer, tail)
        column: str = row[6]
        if missing or tokenizer.key not in _rows.tokenizers_of(column):
            column = await self._remember_counts(row[0], tokenizer.key, missing, seen=column)
        self._known.saw(tenant_id, thread_id, row[4], column)
        state = (
            WorkingMemoryState()
            if row[9] is None
            else _rows.state_of(row[9:14], self._dialect.moment)
        )
        return Tail(thread=thread_of(row, self._dialect), turns=turns, state=state)

    async def _whole_where_uncounted(self, pk: int, rows: list[Row]) -> list[Row]:
        """Tail `rows` with the message whole where a count is still to make and the read left
        the message's files in the store: a turn is counted as stored, its files included (a
        tokenizer's first read of a thread's older turns; a window reads the rest by count)."""
        seqs = [r[0] for r in rows if r[3] is None and r[5] is not None]
        if not seqs:
            return rows
        async with self._dialect.read() as session:
            whole: dict[int, str] = dict(
                await session.rows(
                    f"SELECT seq, message FROM turns WHERE thread_pk = ? "
                    f"AND seq IN ({', '.join('?' * len(seqs))})",
                    (pk, *seqs),
                )
            )
        return [(*r[:2], whole[r[0]], *r[3:5], None) if r[0] in whole else r for r in rows]

    async def search_turns(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        query: str,
        before_seq: int | None = None,
        limit: int = 20,
    ) -> list[list[Turn]]:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        if not isinstance(query, str):
            raise ValidationError("query", f"must be a string, got {type(query).__name__}")
        _rows.check_page(limit, 0)
        if before_seq is not None:
            _rows.check_seq("before_seq", before_seq, minimum=1)
        words = _search.terms(query)
        async with self._dialect.read() as session:
            row = await thread_row(session, self._dialect, tenant_id, thread_id)
            pk, top = row[0], row[4] + 1
            if before_seq is not None:
                top = min(top, before_seq)
            if not words or top <= 1:
                return []
            search = TurnSearch(pk, words, top, limit)
            behind = self._dialect.unindexed(pk, top)
            if behind is None or await session.row(*behind) is None:
                return await self._search(session, search)
        await self._dialect.index_turns(pk)  # turns the search reaches that are not indexed yet
        async with self._dialect.read() as session:
            return await self._search(session, search)

    async def _search(self, session: Session, search: TurnSearch) -> list[list[Turn]]:
        """`search_turns` on an indexed range: the hits' units, the best first."""
        hits = await self._dialect.search_hits(session, search)
        if not hits:
            return []
        marks = ", ".join("?" * len(hits))
        rows = await session.rows(
            f"SELECT unit_seq, {TURN_COLUMNS} FROM turns WHERE thread_pk = ? AND seq < ? "
            f"AND unit_seq IN (SELECT unit_seq FROM turns WHERE thread_pk = ? "
            f"AND seq IN ({marks})) ORDER BY seq",
            (search.thread_pk, search.before_seq, search.thread_pk, *hits),
        )
        units: dict[int, list[Turn]] = {}
        for found in rows:
            units.setdefault(found[0], []).append(self._turn(found[1:]))
        unit_of = {turn.seq: unit_seq for unit_seq, unit in units.items() for turn in unit}
        ranked = dict.fromkeys(unit_of[seq] for seq in hits if seq in unit_of)
        return [units[unit_seq] for unit_seq in ranked]

    async def turn_days(
        self, *, tenant_id: str, thread_id: str, first_seq: int, last_seq: int
    ) -> list[Turn]:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        async with self._dialect.read() as session:
            pk = (await thread_row(session, self._dialect, tenant_id, thread_id))[0]
            times = await session.rows(
                "SELECT seq, created_at FROM turns WHERE thread_pk = ? AND seq >= ? AND seq <= ? "
                "ORDER BY seq",
                (pk, first_seq, last_seq),
            )
            firsts, day = [], None
            for seq, stamp in times:
                moment = self._dialect.moment(stamp).astimezone(UTC).date()
                if moment != day:
                    firsts.append(seq)
                    day = moment
            if not firsts:
                return []
            rows = await session.rows(
                f"SELECT {TURN_COLUMNS} FROM turns WHERE thread_pk = ? "
                f"AND seq IN ({', '.join('?' * len(firsts))}) ORDER BY seq",
                (pk, *firsts),
            )
        return [self._turn(row) for row in rows]

    async def _remember_counts(
        self, pk: int, key: str, counts: dict[int, int], *, seen: str
    ) -> str:
        """Stores counts made by a read, and registers the tokenizer for later appends, in one
        trip (nothing is read first): the tokenizers column `seen` by the read is moved on
        only if it is still that, and the counts are written only where the thread still
        says where they go (a tokenizer once registered keeps its place; a deleted thread
        takes nothing). The column as it should be after it."""
        keys = _rows.tokenizers_of(seen)
        registered = key in keys
        column = seen if registered else json.dumps([*keys, key])
        own = (keys or [key])[0] == key
        async with self._dialect.write() as session:
            # locks the row (PostgreSQL) for the statements after it; its result is not read
            await session.queue("SELECT id FROM threads WHERE id = ?" + self._dialect.lock, (pk,))
            if not registered:
                await session.queue(
                    "UPDATE threads SET tokenizers = ? WHERE id = ? AND tokenizers = ?",
                    (column, pk, seen),
                )
            guard, guarded = (
                ("EXISTS (SELECT 1 FROM threads WHERE id = ?)", (pk,))
                if registered
                else ("(SELECT tokenizers FROM threads WHERE id = ?) = ?", (pk, column))
            )
            after = min(counts, default=0) - 1
            for values, counted in _values(sorted(counts.items())):
                if own:  # the thread's own counts, in the turns' rows, and the running counts
                    await session.queue(
                        _COUNTED.format(values=values, guard=guard),
                        (*counted, after, pk, after, pk, after, pk, pk, *guarded),
                    )
                else:
                    await session.queue(
                        "INSERT INTO turn_tokens (thread_pk, tokenizer, seq, tokens) "
                        f"SELECT ?, ?, v.column1, v.column2 FROM ({values}) AS v WHERE {guard} "
                        "ON CONFLICT DO NOTHING",
                        (pk, key, *counted, *guarded),
                    )
            if counts and own:
                await session.queue(_THREAD_THROUGH, (pk,))
        return column


_VALUES_ROWS = 1_000
"""The most (seq, count) rows one statement of counts carries (2,000 parameters)."""


def _values(rows: Sequence[tuple[int, int]]) -> Iterator[tuple[str, list[int]]]:
    """`rows` as ``VALUES`` lists of at most `_VALUES_ROWS` rows, with their parameters: a
    read's counts of a thousand turns are one statement, not a thousand (each a round trip's
    worth of work on PostgreSQL). Both databases name the columns column1, column2."""
    for start in range(0, len(rows), _VALUES_ROWS):
        chunk = rows[start : start + _VALUES_ROWS]
        yield "VALUES " + ", ".join(["(?, ?)"] * len(chunk)), [n for row in chunk for n in row]
