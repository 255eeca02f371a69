"""A thread's memory state (its summary and facts, and their versions) and the leases on a
thread (its ask lock, its state's update): the SQL, written once.

    state = await store.get_memory_state(tenant_id="acme", thread_id="th1")
    if await store.claim_memory_update(tenant_id="acme", thread_id="th1", owner=me,
                                       ttl_seconds=30):
        await store.write_memory_state(tenant_id="acme", thread_id="th1", write=...)

`SQLStore` inherits these methods, as it does `SQLThreads`'. A state is written with its
version checked and kept in its versions' table in the same transaction.
"""

from __future__ import annotations

from ..errors import ConflictError, NotFoundError
from ..types import Thread, WorkingMemoryState
from . import _rows
from ._dialect import Dialect
from ._leases import RELEASE_THREAD, claim_sql, release, renew_sql
from ._sql_reads import STATE_COLUMNS_OF_S, thread_of, thread_row
from .base import StateWrite

__all__ = ["SQLStates"]

_NEWEST_VERSIONS = (
    "SELECT version, summary, facts, turn_count, created_at FROM memory_state_versions "
    "WHERE thread_pk = ? ORDER BY version DESC LIMIT ?"
)
"""A state's newest versions (thread_pk, how many), as `_rows.state_of` reads them."""


class SQLStates:
    """The memory-state and lease methods of `SQLStore`."""

    _dialect: Dialect

    async def get_memory_state(self, *, tenant_id: str, thread_id: str) -> WorkingMemoryState:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        async with self._dialect.read() as session:
            found = await session.row(
                f"SELECT {STATE_COLUMNS_OF_S} "
                "FROM threads AS th LEFT JOIN memory_states AS s ON s.thread_pk = th.id "
                "WHERE th.tenant_id = ? AND th.thread_id = ?",
                (tenant_id, thread_id),
            )
        if found is None:
            raise NotFoundError("thread", thread_id)
        return (
            WorkingMemoryState()
            if found[0] is None
            else _rows.state_of(found, self._dialect.moment)
        )

    async def write_memory_state(
        self, *, tenant_id: str, thread_id: str, write: StateWrite
    ) -> WorkingMemoryState:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        now = _rows.utcnow()
        stamp = self._dialect.stamp(now)
        facts = _rows.encode_facts(write.facts)
        async with self._dialect.write() as session:
            pk = (await thread_row(session, self._dialect, tenant_id, thread_id, lock=True))[0]
            found = await session.row(
                "SELECT version FROM memory_states WHERE thread_pk = ?", (pk,)
            )
            current = 0 if found is None else found[0]
            if current != write.expected_version:
                raise ConflictError(
                    f"thread {thread_id!r}: memory state is at version {current}, "
                    f"not {write.expected_version}"
                )
            version = current + 1
            await session.queue(
                "INSERT INTO memory_states (thread_pk, version, summary, facts, turn_count, "
                "updated_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (thread_pk) DO UPDATE SET "
                "version = excluded.version, summary = excluded.summary, facts = excluded.facts, "
                "turn_count = excluded.turn_count, updated_at = excluded.updated_at",
                (pk, version, write.summary, facts, write.turn_count, stamp),
            )
            await session.queue(
                "INSERT INTO memory_state_versions (thread_pk, version, summary, facts, "
                "turn_count, reason, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (pk, version, write.summary, facts, write.turn_count, write.reason, stamp),
            )
            if write.forgets:
                await session.queue(
                    "DELETE FROM memory_state_versions WHERE thread_pk = ? AND version < ?",
                    (pk, version),
                )
        return _rows.state_from_row(version, write.summary, facts, write.turn_count, now)

    async def list_memory_states(
        self, *, tenant_id: str, thread_id: str, limit: int = 20
    ) -> list[WorkingMemoryState]:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        _rows.check_page(limit, 0)
        async with self._dialect.read() as session:
            pk = (await thread_row(session, self._dialect, tenant_id, thread_id))[0]
            rows = await session.rows(_NEWEST_VERSIONS, (pk, limit))
        return [_rows.state_of(row, self._dialect.moment) for row in rows]

    async def read_memory(
        self, *, tenant_id: str, thread_id: str, versions: int = 20
    ) -> tuple[Thread, WorkingMemoryState, list[WorkingMemoryState]]:
        """The thread, its memory state and the state's newest versions, from one snapshot:
        the versions never run ahead of the state they are shown beside."""
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        _rows.check_page(versions, 0)
        async with self._dialect.snapshot() as session:
            row = await thread_row(session, self._dialect, tenant_id, thread_id)
            found = await session.row(
                "SELECT version, summary, facts, turn_count, updated_at FROM memory_states "
                "WHERE thread_pk = ?",
                (row[0],),
            )
            history = await session.rows(_NEWEST_VERSIONS, (row[0], versions))
        state = (
            WorkingMemoryState() if found is None else _rows.state_of(found, self._dialect.moment)
        )
        return (
            thread_of(row, self._dialect),
            state,
            [_rows.state_of(r, self._dialect.moment) for r in history],
        )

    # An ask lock's row names its thread by ids (the thread may not exist yet): each of its
    # writes is one statement, which PostgreSQL runs in one round trip.

    async def claim_thread(
        self, *, tenant_id: str, thread_id: str, owner: str, ttl_seconds: float
    ) -> bool:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        keys = {"tenant_id": tenant_id, "thread_id": thread_id}
        claim = claim_sql(self._dialect, "thread_locks", keys, owner, ttl_seconds)
        return await self._dialect.write_one(*claim) == 1

    async def renew_thread(
        self, *, tenant_id: str, thread_id: str, owner: str, ttl_seconds: float
    ) -> bool:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        keys = {"tenant_id": tenant_id, "thread_id": thread_id}
        renew = renew_sql(self._dialect, "thread_locks", keys, owner, ttl_seconds)
        return await self._dialect.write_one(*renew) == 1

    async def release_thread(self, *, tenant_id: str, thread_id: str, owner: str) -> None:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        await self._dialect.write_one(RELEASE_THREAD, (tenant_id, thread_id, owner))

    async def claim_memory_update(
        self, *, tenant_id: str, thread_id: str, owner: str, ttl_seconds: float
    ) -> bool:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        async with self._dialect.write() as session:
            pk = (await thread_row(session, self._dialect, tenant_id, thread_id))[0]
            claim = claim_sql(self._dialect, "memory_leases", {"thread_pk": pk}, owner, ttl_seconds)
            return await session.last(*claim) == 1

    async def renew_memory_update(
        self, *, tenant_id: str, thread_id: str, owner: str, ttl_seconds: float
    ) -> bool:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        async with self._dialect.write() as session:
            pk = (await thread_row(session, self._dialect, tenant_id, thread_id))[0]
            renew = renew_sql(self._dialect, "memory_leases", {"thread_pk": pk}, owner, ttl_seconds)
            return await session.last(*renew) == 1

    async def release_memory_update(self, *, tenant_id: str, thread_id: str, owner: str) -> None:
        tenant_id, thread_id = _rows.check_scope(tenant_id, thread_id)
        async with self._dialect.write() as session:
            pk = (await thread_row(session, self._dialect, tenant_id, thread_id))[0]
            await session.queue(*release("memory_leases", {"thread_pk": pk}, owner))
