"""Writing threads and turns: the SQL, written once.

`SQLStore` inherits these methods (and the reads', `_sql_reads`, which they build on); the
dialect (`_dialect`) runs them on SQLite or PostgreSQL. Every write is one transaction that
first locks the thread's row where the database needs it (PostgreSQL's ``FOR UPDATE``;
SQLite's ``BEGIN IMMEDIATE`` already serializes writers), so two workers never give two turns
the same seq. The memory state and the leases are `_sql_states`'.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from ..errors import ConflictError
from ..messages import (
    OpenUnit,
    Origin,
    PlannedTurn,
    check_id,
    dumps_message,
    normalize_turns,
    plan_units,
)
from ..tokens import Tokenizer
from ..types import Thread, Turn
from . import _rows
from ._dialect import Dialect, KnownAppend, Row, Session, TailRead
from ._known import KnownThreads
from ._leases import RELEASE_THREAD, claim_sql
from ._sql_reads import (
    SELECT_THREAD,
    THREAD_COLUMNS,
    THREAD_COLUMNS_OF_TH,
    TURN_COLUMNS,
    SQLReads,
    thread_of,
    thread_row,
)
from .base import Claim, with_window

__all__ = ["INSERT_THREAD", "INSERT_TURN", "INSERT_TURN_TOKENS", "SQLThreads"]

_SELECT_WITH_UNIT = (
    f"SELECT {THREAD_COLUMNS_OF_TH}, th.tokens_through, t.message "
    "FROM threads AS th LEFT JOIN turns AS t ON t.thread_pk = th.id AND th.last_unit_seq > 0 "
    "AND t.seq >= th.last_unit_seq WHERE th.tenant_id = ? AND th.thread_id = ? ORDER BY t.seq"
)
"""The thread's row, its running count, and the turns of its last unit (which new tool results
may join): what an append needs, in the statement that locks the row."""
INSERT_THREAD = (
    "INSERT INTO threads (tenant_id, thread_id, user_id, created_at, updated_at, tokenizers) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, thread_id) DO NOTHING"
)
"""A new thread's row, with no turns; nothing when it exists."""


INSERT_TURN = (
    "INSERT INTO turns (thread_pk, seq, unit_seq, role, user_id, message, created_at, format, "
    "item, tokens, tokens_through, shed, shed_bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_MOVED_ON = (
    "UPDATE threads SET turn_count = ?, last_unit_seq = ?, updated_at = ?, tokens_through = ? "
    "WHERE id = ?"
)
"""A thread's row after an append: its turn count, last unit, time and running count."""
INSERT_TURN_TOKENS = (
    "INSERT INTO turn_tokens (thread_pk, tokenizer, seq, tokens) VALUES (?, ?, ?, ?)"
)
"""A turn's count with a tokenizer other than its thread's first."""


_NEW_TOKENIZERS = "[]"
"""A new thread's tokenizers column (its default in the schema)."""


class SQLThreads(SQLReads):
    """The ThreadStore methods of `SQLStore`."""

    _dialect: Dialect
    _known: KnownThreads

    async def append(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        messages: Sequence[Any],
        user_id: str | None = None,
        after_seq: int | None = None,
        created_at: Sequence[datetime] | None = None,
    ) -> list[Turn]:
        return await self._append(tenant_id, thread_id, messages, user_id, after_seq, created_at)

    async def append_and_release(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        messages: Sequence[Any],
        owner: str,
        user_id: str | None = None,
    ) -> list[Turn]:
        return await self._append(tenant_id, thread_id, messages, user_id, release=owner)

    async def _append(
        self,
        tenant_id: str,
        thread_id: str,
        messages: Sequence[Any],
        user_id: str | None,
        after_seq: int | None = None,
        created_at: Sequence[datetime] | None = None,
        *,
        release: str | None = None,
    ) -> list[Turn]:
        """`append`; with `release`, that owner's ask lock is given back in the same
        transaction (kept when nothing is written: the transaction failed)."""
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        if user_id is not None:
            check_id("user_id", user_id)
        if after_seq is not None:
            _rows.check_seq("after_seq", after_seq)
        clean, origins = normalize_turns(messages)
        now = _rows.utcnow()
        times = _rows.check_times(created_at, len(clean), now)  # the order checked below too
        stamp = self._dialect.stamp(now)
        if after_seq is None and clean and clean[0]["role"] != "tool" and created_at is None:
            known = await self._append_known(
                tenant_id, thread_id, user_id, stamp, clean, origins, release
            )
            if known is not None:
                return _appended(known, origins, times)
        async with self._dialect.write() as session:
            found = await session.rows(
                _SELECT_WITH_UNIT + self._dialect.lock_of("th"), (tenant_id, thread_id)
            )
            if release is not None:
                await session.queue(RELEASE_THREAD, (tenant_id, thread_id, release))
            if found:
                row, through = found[0][:9], found[0][9]
                unit = [r[10] for r in found if r[10] is not None]
            else:
                row = await self._new_thread(session, tenant_id, thread_id, user_id, stamp)
                through, unit = 0, []
            pk, turn_count, last_unit_seq = row[0], row[4], row[5]
            if after_seq is not None and after_seq < turn_count:
                turn_count, last_unit_seq, through = await self._cut(session, pk, kept=after_seq)
                unit = [
                    r[0]
                    for r in await session.rows(
                        "SELECT message FROM turns WHERE thread_pk = ? AND seq >= ? ORDER BY seq",
                        (pk, last_unit_seq),
                    )
                ]
            if not clean:
                return []
            if created_at is not None and turn_count:  # an imported history goes on in order
                before = await session.row(
                    "SELECT created_at FROM turns WHERE thread_pk = ? AND seq = ?",
                    (pk, turn_count),
                )
                if before is not None:
                    _rows.check_times(times, len(times), now, self._dialect.moment(before[0]))
            open_unit = None
            if last_unit_seq:
                open_unit = OpenUnit.from_turns(_rows.loads_messages(unit), last_unit_seq)
            prepared = _rows.plan_append(
                clean,
                turn_count=turn_count,
                open_unit=open_unit,
                tokenizer_keys=_rows.tokenizers_of(row[6]),
            )
            through = await self._insert_turns(
                session,
                pk,
                user_id,
                [self._dialect.stamp(moment) for moment in times],
                prepared.turns,
                prepared.serialized,
                prepared.shed,
                origins,
                prepared.counts,
                through,
            )
            await session.queue(
                _MOVED_ON,
                (prepared.turns[-1].seq, prepared.last_unit_seq, stamp, through, pk),
            )
        self._known.saw(tenant_id, thread_id, prepared.turns[-1].seq, row[6])
        return _appended(prepared.turns, origins, times)

    async def _append_known(
        self,
        tenant_id: str,
        thread_id: str,
        user_id: str | None,
        stamp: object,
        clean: Sequence[Any],
        origins: Sequence[Origin],
        release: str | None,
    ) -> list[PlannedTurn] | None:
        """New turns that open a unit, written in one trip when the thread is as this process
        last saw it (with `release`'s ask lock given back); None when it was not (nothing
        written)."""
        known = self._known.get(tenant_id, thread_id)
        if known is None:
            return None
        write, planned = _known_write(
            tenant_id, thread_id, known.turn_count, known.tokenizers, user_id, stamp, clean, origins
        )
        base = await self._dialect.append_known(replace(write, release=release))
        return None if base is None else self._wrote(write, planned, base)

    def _wrote(
        self, write: KnownAppend, planned: Sequence[PlannedTurn], base: int
    ) -> list[PlannedTurn]:
        """`write`'s turns as written after `base`, the thread remembered as they left it."""
        self._known.saw(write.tenant_id, write.thread_id, base + len(planned), write.tokenizers)
        return [
            PlannedTurn(seq=t.seq + base, unit_seq=t.unit_seq + base, message=t.message)
            for t in planned
        ]

    async def pop_turns(self, *, tenant_id: str, thread_id: str) -> list[Turn]:
        """Removes the thread's newest unit (see `TurnStore.pop_turns`); the removed turns,
        oldest first ([] for a thread without turns)."""
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        async with self._dialect.write() as session:
            row = await thread_row(session, self._dialect, tenant_id, thread_id, lock=True)
            pk, last_unit_seq = row[0], row[5]
            if not row[4]:
                return []
            removed = await session.rows(
                f"SELECT {TURN_COLUMNS} FROM turns WHERE thread_pk = ? AND seq >= ? ORDER BY seq",
                (pk, last_unit_seq),
            )
            await self._cut(session, pk, kept=last_unit_seq - 1)
        return [self._turn(r) for r in removed]

    async def replace_turns(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        messages: Sequence[Any],
        user_id: str | None = None,
    ) -> list[Turn]:
        """Makes `messages` the thread's turns, all or nothing (see `TurnStore.replace_turns`);
        the thread's turns as stored now."""
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        if user_id is not None:
            check_id("user_id", user_id)
        clean, origins = normalize_turns(messages)
        planned = plan_units(None, clean, first_seq=1)  # the whole thread must be valid
        texts = [dumps_message(turn.message) for turn in planned]
        wanted = [(text, o.format, o.text) for text, o in zip(texts, origins, strict=True)]
        now = _rows.utcnow()
        stamp = self._dialect.stamp(now)
        async with self._dialect.write() as session:
            row = await self._locked_or_new_thread(session, tenant_id, thread_id, user_id, stamp)
            pk = row[0]
            stored = await session.rows(
                "SELECT message, format, item FROM turns WHERE thread_pk = ? ORDER BY seq", (pk,)
            )
            kept = 0
            for old, new in zip(stored, wanted, strict=False):
                if tuple(old) != new:
                    break
                kept += 1
            *_, through = await self._cut(session, pk, kept=kept)
            fresh = planned[kept:]
            if fresh:
                through = await self._insert_turns(
                    session,
                    pk,
                    user_id,
                    [stamp] * len(fresh),
                    fresh,
                    texts[kept:],
                    [_rows.shed_row(turn.message) for turn in fresh],
                    origins[kept:],
                    _rows.counts_of(fresh, _rows.tokenizers_of(row[6])),
                    through,
                )
                await session.queue(
                    _MOVED_ON, (planned[-1].seq, planned[-1].unit_seq, stamp, through, pk)
                )
            rows = await session.rows(
                f"SELECT {TURN_COLUMNS} FROM turns WHERE thread_pk = ? ORDER BY seq", (pk,)
            )
        return [self._turn(r) for r in rows]

    async def fork_thread(
        self, *, tenant_id: str, source_id: str, thread_id: str, through_seq: int
    ) -> Thread:
        """A new thread with the source's turns up to `through_seq` (see `TurnStore`)."""
        tenant_id, source_id = _rows.check_scope(tenant_id, source_id)
        thread_id = check_id("thread_id", thread_id)
        _rows.check_seq("through_seq", through_seq)
        stamp = self._dialect.stamp(_rows.utcnow())
        async with self._dialect.write() as session:
            source = await thread_row(session, self._dialect, tenant_id, source_id, lock=True)
            kept = min(through_seq, source[4])
            unit_seq, through = await _end_at(session, source[0], kept)
            row = await session.row(
                "INSERT INTO threads (tenant_id, thread_id, user_id, turn_count, last_unit_seq, "
                "tokenizers, tokens_through, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                f"ON CONFLICT (tenant_id, thread_id) DO NOTHING RETURNING {THREAD_COLUMNS}",
                (tenant_id, thread_id, source[3], kept, unit_seq, source[6], through, stamp, stamp),
            )
            if row is None:
                raise ConflictError(f"thread {thread_id!r} exists already")
            pk, source_pk = row[0], source[0]
            await session.queue(
                "INSERT INTO turns (thread_pk, seq, unit_seq, role, user_id, message, created_at, "
                "format, item, tokens, tokens_through, shed, shed_bytes) SELECT ?, seq, "
                "unit_seq, role, user_id, message, created_at, format, item, tokens, "
                "tokens_through, shed, shed_bytes FROM turns WHERE thread_pk = ? AND seq <= ?",
                (pk, source_pk, kept),
            )
            await session.queue(
                "INSERT INTO turn_tokens (thread_pk, tokenizer, seq, tokens) SELECT ?, "
                "tokenizer, seq, tokens FROM turn_tokens WHERE thread_pk = ? AND seq <= ?",
                (pk, source_pk, kept),
            )
            state = await session.row(
                "SELECT summary, facts, turn_count FROM memory_state_versions "
                "WHERE thread_pk = ? AND turn_count <= ? ORDER BY version DESC LIMIT 1",
                (source_pk, kept),
            )
            if state is not None:  # the summary of the common part comes along
                await session.queue(
                    "INSERT INTO memory_states (thread_pk, version, summary, facts, turn_count, "
                    "updated_at) VALUES (?, 1, ?, ?, ?, ?)",
                    (pk, state[0], state[1], state[2], stamp),
                )
                await session.queue(
                    "INSERT INTO memory_state_versions (thread_pk, version, summary, facts, "
                    "turn_count, reason, created_at) VALUES (?, 1, ?, ?, ?, 'fork', ?)",
                    (pk, state[0], state[1], state[2], stamp),
                )
        return thread_of(row, self._dialect)

    async def delete_thread(self, *, tenant_id: str, thread_id: str) -> None:
        """Deletes the thread and everything of it (see `TurnStore.delete_thread`)."""
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        async with self._dialect.write() as session:
            pk = (await thread_row(session, self._dialect, tenant_id, thread_id, lock=True))[0]
            # Turns, counts, the state, its versions and the lease go with the row (cascade).
            await session.queue("DELETE FROM threads WHERE id = ?", (pk,))
            await session.queue(
                "DELETE FROM working_memory WHERE tenant_id = ? AND scope = 'conversation' "
                "AND owner_id = ?",
                (tenant_id, thread_id),
            )

    async def _insert_turns(
        self,
        session: Session,
        pk: int,
        user_id: str | None,
        stamps: Sequence[object],
        turns: Sequence[PlannedTurn],
        texts: Sequence[str],
        sheds: Sequence[tuple[str | None, int | None]],
        origins: Sequence[Origin],
        counts: _rows.Counts,
        before: int | None,
    ) -> int | None:
        """Queues the rows of new turns: each with its chat text, origin, own count, running
        count (summed on from `before`, the thread's) and time (`stamps`, one per turn), and
        the counts with the thread's other tokenizers. The thread's running count after them."""
        through, after = _rows.running_counts(counts.own, before)
        await session.run_many(
            INSERT_TURN,
            [
                (
                    pk,
                    t.seq,
                    t.unit_seq,
                    t.message["role"],
                    user_id,
                    text,
                    moment,
                    o.format,
                    o.text,
                    n,
                    running,
                    *shed,
                )
                for t, text, shed, o, n, running, moment in zip(
                    turns, texts, sheds, origins, counts.own, through, stamps, strict=True
                )
            ],
        )
        if counts.others:
            await session.run_many(
                INSERT_TURN_TOKENS,
                [(pk, key, seq, tokens) for key, seq, tokens in counts.others],
            )
        return after

    async def _locked_or_new_thread(
        self, session: Session, tenant_id: str, thread_id: str, user_id: str | None, stamp: object
    ) -> Row:
        """The thread's row, locked; created (with no turns) when there is none."""
        row = await session.row(SELECT_THREAD + self._dialect.lock, (tenant_id, thread_id))
        return row or await self._new_thread(session, tenant_id, thread_id, user_id, stamp)

    async def _new_thread(
        self, session: Session, tenant_id: str, thread_id: str, user_id: str | None, stamp: object
    ) -> Row:
        """A new thread's row (with no turns), or the existing one, locked, when another
        writer created it since this transaction looked."""
        row = await session.row(
            f"{INSERT_THREAD} RETURNING {THREAD_COLUMNS}",
            (tenant_id, thread_id, user_id, stamp, stamp, _NEW_TOKENIZERS),
        )
        return row or await thread_row(session, self._dialect, tenant_id, thread_id, lock=True)

    async def _cut(self, session: Session, pk: int, *, kept: int) -> tuple[int, int, int | None]:
        """Removes the turns after seq `kept`, with their counts, and rolls the memory state
        back so that the summary describes only turns that still exist. In the caller's
        transaction, the thread's row locked. The thread's turn count, last unit's seq and
        running count."""
        await session.queue("DELETE FROM turn_tokens WHERE thread_pk = ? AND seq > ?", (pk, kept))
        removed = await session.run("DELETE FROM turns WHERE thread_pk = ? AND seq > ?", (pk, kept))
        last_unit_seq, through = await _end_at(session, pk, kept)
        if removed:
            await session.queue(
                "UPDATE threads SET turn_count = ?, last_unit_seq = ?, tokens_through = ? "
                "WHERE id = ?",
                (kept, last_unit_seq, through, pk),
            )
            await self._roll_back_state(session, pk, kept=kept)
        return kept, last_unit_seq, through

    async def _roll_back_state(self, session: Session, pk: int, *, kept: int) -> None:
        """Moves the state back to the newest version that covers at most `kept` turns, and
        drops the versions that cover more: none may describe a removed turn. Without such a
        version: empty, covering nothing; or, after a forget, still forgotten up to `kept`."""
        current = await session.row(
            "SELECT version, turn_count FROM memory_states WHERE thread_pk = ?", (pk,)
        )
        if current is None or current[1] <= kept:
            return
        target = await session.row(
            "SELECT summary, facts, turn_count FROM memory_state_versions "
            "WHERE thread_pk = ? AND turn_count <= ? ORDER BY version DESC LIMIT 1",
            (pk, kept),
        )
        if target is None:
            forgotten = await session.row(
                "SELECT 1 FROM memory_state_versions WHERE thread_pk = ? AND reason = 'reset'",
                (pk,),
            )
            target = ("", "[]", kept if forgotten else 0)
        summary, facts, turn_count = target
        version = current[0] + 1
        stamp = self._dialect.stamp(_rows.utcnow())
        await session.queue(
            "DELETE FROM memory_state_versions WHERE thread_pk = ? AND turn_count > ?", (pk, kept)
        )
        await session.queue(
            "UPDATE memory_states SET version = ?, summary = ?, facts = ?, turn_count = ?, "
            "updated_at = ? WHERE thread_pk = ?",
            (version, summary, facts, turn_count, stamp, pk),
        )
        await session.queue(
            "INSERT INTO memory_state_versions (thread_pk, version, summary, facts, turn_count, "
            "reason, created_at) VALUES (?, ?, ?, ?, ?, 'rollback', ?)",
            (pk, version, summary, facts, turn_count, stamp),
        )

    async def claim_and_open(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        owner: str,
        ttl_seconds: float,
        tokenizer: Tokenizer,
        limit: int,
        window: tuple[int, int | None] | None = None,
        opening: Sequence[Any] = (),
        user_id: str | None = None,
    ) -> Claim:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        keys = {"tenant_id": tenant_id, "thread_id": thread_id}
        write: KnownAppend | None = None
        planned: list[PlannedTurn] = []
        origins: Sequence[Origin] = []
        now = _rows.utcnow()
        seen = self._known.get(tenant_id, thread_id)
        if opening and (seen is None or seen.turn_count == 0):  # else it has turns: no opening
            if user_id is not None:
                check_id("user_id", user_id)
            clean, origins = normalize_turns(opening)  # a ValidationError before the lock
            if clean and clean[0]["role"] != "tool":  # else append() says what is wrong
                tokenizers = json.dumps([tokenizer.key])  # as `_tail` sees a missing thread
                stamp = self._dialect.stamp(now)
                write, planned = _known_write(
                    tenant_id, thread_id, 0, tokenizers, user_id, stamp, clean, origins
                )
                write = replace(write, held=owner)
        claimed, found, base = await self._dialect.claim_and_read_tail(
            claim_sql(self._dialect, "thread_locks", keys, owner, ttl_seconds),
            _lock_read(tokenizer, tenant_id, thread_id, limit, window, self._dialect),
            write,
        )
        if not claimed:
            return Claim(taken=False, tail=None)
        tail = await self._tail(tenant_id, thread_id, tokenizer, found)
        if write is None or base is None:
            return Claim(taken=True, tail=tail)
        opened = self._wrote(write, planned, base)
        return Claim(taken=True, tail=tail, opened=_appended(opened, origins, [now] * len(opened)))


async def _end_at(session: Session, pk: int, seq: int) -> tuple[int, int | None]:
    """The unit and the running count of the thread's turn `seq`, where a thread cut after it
    goes on from ((0, 0) at seq 0)."""
    found = await session.row(
        "SELECT unit_seq, tokens_through FROM turns WHERE thread_pk = ? AND seq = ?", (pk, seq)
    )
    return (found[0], found[1]) if found else (0, 0)


def _lock_read(
    tokenizer: Tokenizer,
    tenant_id: str,
    thread_id: str,
    limit: int,
    window: tuple[int, int | None] | None,
    dialect: Dialect,
) -> TailRead:
    """The read an ask lock takes: `limit` turns, and the window's first page where the
    dialect folds it in (`Dialect.window_with_lock`)."""
    turns, tokens = with_window(limit, window if dialect.window_with_lock else None)
    return TailRead(tokenizer.key, tenant_id, thread_id, turns, tokens=tokens)


def _known_write(
    tenant_id: str,
    thread_id: str,
    turn_count: int,
    tokenizers: str,
    user_id: str | None,
    stamp: object,
    clean: Sequence[Any],
    origins: Sequence[Origin],
) -> tuple[KnownAppend, list[PlannedTurn]]:
    """New turns that open a unit, for the end of a thread known to have `turn_count` turns
    counted with `tokenizers` (a `KnownAppend`, its seqs relative), and the turns it plans."""
    prepared = _rows.plan_append(
        clean, turn_count=0, open_unit=None, tokenizer_keys=_rows.tokenizers_of(tokenizers)
    )
    write = KnownAppend(
        tenant_id=tenant_id,
        thread_id=thread_id,
        turn_count=turn_count,
        tokenizers=tokenizers,
        create=turn_count == 0,
        user_id=user_id,
        stamp=stamp,
        turns=[
            (t.seq, t.unit_seq, t.message["role"], text, o.format, o.text, n, *shed)
            for t, text, o, n, shed in zip(
                prepared.turns,
                prepared.serialized,
                origins,
                prepared.counts.own,
                prepared.shed,
                strict=True,
            )
        ],
        others=prepared.counts.others,
    )
    return write, prepared.turns


def _appended(
    turns: Sequence[PlannedTurn], origins: Sequence[Origin], times: Sequence[datetime]
) -> list[Turn]:
    """What `append` returns: the stored turns as `Turn`s, with their times."""
    return [
        Turn.from_message(
            t.message, seq=t.seq, created_at=moment, format=origin.format, item=origin.item
        )
        for t, origin, moment in zip(turns, origins, times, strict=True)
    ]
