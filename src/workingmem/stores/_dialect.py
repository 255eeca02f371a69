"""What differs between the databases: a `Session` to run statements in, and a `Dialect`.

    async with dialect.write() as session:          # one transaction
        row = await session.row("SELECT ... WHERE id = ?" + dialect.lock, (pk,))
        await session.run("UPDATE ... SET updated_at = ?", (dialect.stamp(now),))

`SQLStore` owns the control flow (what is read, checked and written, in which transaction) and
writes its SQL once, with ``?`` placeholders. A dialect supplies the rest: its sessions
(placeholders, the driver's calls, its errors as `StoreError`), how a write is serialized
(`lock`: ``FOR UPDATE`` on PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` already serializes),
timestamps (ISO text on SQLite, ``timestamptz`` on PostgreSQL), the one statement that reads a
thread's tail, and its migrations.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

__all__ = [
    "UNCOUNTED_PAGE",
    "Dialect",
    "KnownAppend",
    "Row",
    "Session",
    "TailRead",
    "TurnSearch",
]

Row = tuple[Any, ...]

UNCOUNTED_PAGE = 64
"""Turns read past the counted ones when a token goal meets turns not counted yet: they are
counted by the caller, so a read of a thread never counted stays a page."""


@dataclass(frozen=True, slots=True)
class TailRead:
    """What a tail read asks for: a thread's newest turns, before `before_seq` if set."""

    tokenizer_key: str
    tenant_id: str
    thread_id: str
    limit: int
    """At most this many turns."""
    before_seq: int | None = None
    tokens: int | None = None
    """Enough turns to pass this many tokens, and no more: the newest turns through the first
    whose counts add up past it (fewer when the thread is shorter, or some turn is not
    counted yet; the caller reads further back when it must)."""


@dataclass(frozen=True, slots=True)
class KnownAppend:
    """New turns for the end of a thread whose tokenizers the writer knows: their seqs are
    relative (1 is the turn after the thread's last), so the rows can be written without
    reading the thread first. Only for turns that open a new unit (a tool result must see
    its call)."""

    tenant_id: str
    thread_id: str
    turn_count: int
    tokenizers: str
    """The thread's turn count and tokenizers column as the writer last saw them (the
    counts are made for these): the write is refused (None) when the row says otherwise."""
    user_id: str | None
    stamp: object
    turns: list[tuple[int, int, str, str, str, str | None, int | None, str | None, int | None]]
    """(seq, unit_seq, role, message JSON, format, item JSON, own count, shed message JSON,
    shed bytes), seqs relative (`_rows.PreparedAppend.shed`)."""
    others: list[tuple[str, int, int]]
    """(tokenizer key, relative seq, tokens) with the thread's other tokenizers."""
    create: bool = False
    """Create the thread first when there is none (it was last seen missing, or empty),
    with `tokenizers` (those the read that found it missing counts with), so the expectation
    holds for it; a thread another writer created meanwhile does not meet it."""
    release: str | None = None
    """An owner whose ask lock of the thread is given back with the turns (`RELEASE_THREAD`),
    only when they are written."""
    held: str | None = None
    """An owner who must hold the thread's ask lock for the turns to be written: an ask's
    opening, written in its lock's own trip (`Dialect.claim_and_read_tail`)."""

    def thread_row(self) -> tuple[object, ...]:
        """The parameters of `INSERT_THREAD` for the thread `create` makes."""
        return (
            self.tenant_id,
            self.thread_id,
            self.user_id,
            self.stamp,
            self.stamp,
            self.tokenizers,
        )


@dataclass(frozen=True, slots=True)
class TurnSearch:
    """A full-text search of one thread's turns: the seqs of those that best match `terms`."""

    thread_pk: int
    terms: list[str]
    """The words searched for (`_search.terms`): a turn matches when it has any of them."""
    before_seq: int
    """Only turns before this seq (those a window does not hold); the thread has
    ``before_seq - 1`` of them."""
    limit: int


class Session(Protocol):
    """Statements inside one transaction (a write) or one snapshot (a read)."""

    async def rows(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        """Every row of a query."""
        ...

    async def row(self, sql: str, params: Sequence[object] = ()) -> Row | None:
        """The first row of a query, or None."""
        ...

    async def run(self, sql: str, params: Sequence[object] = ()) -> int:
        """Runs a statement; the rows it changed."""
        ...

    async def queue(self, sql: str, params: Sequence[object] = ()) -> None:
        """Runs a statement whose result nobody reads: it may travel with the next statement
        or the commit (one trip for several), so its error may surface there."""
        ...

    async def run_many(self, sql: str, params: Sequence[Sequence[object]]) -> None:
        """Runs a statement once per parameter row; queued like `queue`."""
        ...

    async def last(self, sql: str, params: Sequence[object] = ()) -> int:
        """Runs a write's last statement and commits with it, in one trip; the rows it
        changed. Nothing may follow it in the transaction."""
        ...


class Dialect(ABC):
    """One database's side of `SQLStore`."""

    name: str
    """``sqlite`` or ``postgres``: the folder of its migrations."""
    lock: str
    """Appended to a SELECT inside a write to lock the rows it reads (or "")."""
    window_with_lock: bool = True
    """Whether an ask lock's read takes the window's first page too (`claim_and_open`'s
    `window`): where every statement is a round trip, it saves the window's own."""

    def lock_of(self, alias: str) -> str:
        """Appended to a SELECT with joins to lock only the rows of table `alias`."""
        return f"{self.lock} OF {alias}" if self.lock else ""

    @abstractmethod
    def write(self) -> AbstractAsyncContextManager[Session]:
        """A write transaction, serialized against other writers of the rows it locks."""

    @abstractmethod
    def read(self) -> AbstractAsyncContextManager[Session]:
        """A consistent read: one snapshot for all its statements."""

    async def write_one(self, sql: str, params: Sequence[object] = ()) -> int:
        """One write statement, atomic on its own (a transaction of its own where the
        database needs one); the rows it changed."""
        async with self.write() as session:
            return await session.last(sql, params)

    @abstractmethod
    def snapshot(self) -> AbstractAsyncContextManager[Session]:
        """A read whose statements all see one snapshot of the database (what `read` promises
        only where the database gives it for free)."""

    @abstractmethod
    def stamp(self, moment: datetime) -> object:
        """A timestamp as the database stores it."""

    @abstractmethod
    def moment(self, value: Any) -> datetime:
        """A stored timestamp as an aware datetime."""

    @abstractmethod
    async def read_tail(self, read: TailRead) -> tuple[Row, list[Row]] | None:
        """One trip (SQLite's thread, PostgreSQL's round trip), one snapshot: the thread row
        (its 9 columns, then its memory state's 5, NULL when it has none) and its newest
        turns as `read` asks, newest first, each as (seq, unit_seq, message, cached count or
        NULL); None for a missing thread."""

    @abstractmethod
    async def claim_and_read_tail(
        self,
        claim: tuple[str, Sequence[object]],
        read: TailRead,
        opening: KnownAppend | None = None,
    ) -> tuple[bool, tuple[Row, list[Row]] | None, int | None]:
        """One trip: `claim` (a lock's upsert, one row changed when it took the lock) and
        `read_tail(read)`, read after it; whether it took the lock, and what the read found
        when it did (else None, read or not). With `opening` (a `KnownAppend` that creates,
        at turn count 0): its turns written too, after the read, when the lock was taken and
        the thread had no turns (missing, or empty with `opening`'s tokenizers); the seq its
        relative seqs count from (0) when they were, else None."""

    @abstractmethod
    def search(self, search: TurnSearch) -> tuple[str, Sequence[object]]:
        """The statement (``?`` placeholders) and its parameters that give the seqs of the
        thread's turns best matching `search`, one column, the best first, through the
        database's full-text index (migration 0010)."""

    async def search_hits(self, session: Session, search: TurnSearch) -> list[int]:
        """The seqs `search` finds in `session`, the best first (`search`'s statement). A
        dialect that indexes a turn's words in the search itself runs that first."""
        return [hit[0] for hit in await session.rows(*self.search(search))]

    def unindexed(self, thread_pk: int, before_seq: int) -> tuple[str, Sequence[object]] | None:
        """A statement that gives a row when the thread has turns before `before_seq` that its
        full-text index does not hold yet, for `index_turns` to index before the search; None
        where no turn waits for that (every turn indexed as it is written, or by
        `search_hits`)."""
        return None

    async def index_turns(self, thread_pk: int) -> None:
        """Puts the thread's turns that the full-text index does not hold yet into it (only
        where `unindexed` names any)."""
        raise NotImplementedError

    @abstractmethod
    async def append_known(self, write: KnownAppend) -> int | None:
        """One trip (one statement on PostgreSQL): `write`'s turns after the thread's last,
        its turn count and unit moved on, when its row still has `write`'s turn count and
        tokenizers; the seq the relative ones count from, or None (no such thread, another
        turn count, other tokenizers): nothing was written, and the caller appends the
        ordinary way."""

    @abstractmethod
    async def migrate(self) -> None:
        """Applies the migrations not applied yet, each with its record, one migrator at a
        time across processes."""

    @abstractmethod
    async def aclose(self) -> None:
        """Closes the connections."""
