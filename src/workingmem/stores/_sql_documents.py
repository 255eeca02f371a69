"""Agent-memory documents (spec 003) and their versions: the SQL, written once.

    doc = await store.put_document(tenant_id="t1", scope="user", owner_id="u1",
                                   content="...", expected_version=0)

A write first makes sure the document's row exists (``INSERT ... ON CONFLICT DO NOTHING``, so
two first writers do not both insert), then reads it locked (the dialect's `lock`): reading the
version and writing the next one cannot interleave with another writer's.
"""

from __future__ import annotations

from ..errors import ConflictError, NotFoundError, StoreError
from . import _rows
from ._dialect import Dialect, Row
from .documents import (
    DEFAULT_KEEP_VERSIONS,
    DocumentReason,
    Scope,
    WorkingMemoryDocument,
    check_document_key,
    check_keep_versions,
    check_version,
)

__all__ = ["SQLDocuments"]

_KEY = "tenant_id = ? AND scope = ? AND owner_id = ?"
_D_KEY = "d.tenant_id = ? AND d.scope = ? AND d.owner_id = ?"
_VERSIONS = (
    "SELECT v.version, v.content, v.created_at, v.reason FROM working_memory_versions AS v "
    "JOIN working_memory AS d ON d.id = v.document_pk"
)


class SQLDocuments:
    """The DocumentStore methods of `SQLStore`."""

    _dialect: Dialect

    def _document(self, scope: Scope, owner: str, row: Row) -> WorkingMemoryDocument:
        version, content, stamp, reason = row
        return WorkingMemoryDocument(
            scope=scope,
            owner_id=owner,
            content=content,
            version=version,
            updated_at=self._dialect.moment(stamp),
            reason=reason,
        )

    async def get_document(
        self, *, tenant_id: str, scope: Scope, owner_id: str
    ) -> WorkingMemoryDocument:
        key = check_document_key(tenant_id, scope, owner_id)
        async with self._dialect.read() as session:
            row = await session.row(
                "SELECT d.version, d.content, d.updated_at, v.reason FROM working_memory AS d "
                "LEFT JOIN working_memory_versions AS v "
                f"ON v.document_pk = d.id AND v.version = d.version WHERE {_D_KEY}",
                key,
            )
        if row is None:
            return WorkingMemoryDocument(scope=key[1], owner_id=key[2], content=None, version=0)
        return self._document(key[1], key[2], row)

    async def put_document(
        self,
        *,
        tenant_id: str,
        scope: Scope,
        owner_id: str,
        content: str | None,
        expected_version: int | None,
        reason: DocumentReason = "update",
        keep_versions: int = DEFAULT_KEEP_VERSIONS,
    ) -> WorkingMemoryDocument:
        key = check_document_key(tenant_id, scope, owner_id)
        check_keep_versions(keep_versions)
        now = _rows.utcnow()
        stamp = self._dialect.stamp(now)
        async with self._dialect.write() as session:
            await session.queue(
                "INSERT INTO working_memory (tenant_id, scope, owner_id, version, content, "
                "updated_at) VALUES (?, ?, ?, 0, NULL, ?) "
                "ON CONFLICT (tenant_id, scope, owner_id) DO NOTHING",
                (*key, stamp),
            )
            found = await session.row(
                f"SELECT id, version FROM working_memory WHERE {_KEY}" + self._dialect.lock, key
            )
            if found is None:  # inserted or kept just above, in this transaction
                raise StoreError(f"working memory of {key[1]} {key[2]!r} vanished mid-write")
            pk, current = found
            if expected_version is not None and current != expected_version:
                raise ConflictError(
                    f"working memory of {key[1]} {key[2]!r} is at version {current}, "
                    f"not {expected_version}"
                )
            version = current + 1
            await session.queue(
                "UPDATE working_memory SET version = ?, content = ?, updated_at = ? WHERE id = ?",
                (version, content, stamp, pk),
            )
            await session.queue(
                "INSERT INTO working_memory_versions (document_pk, version, content, reason, "
                "created_at) VALUES (?, ?, ?, ?, ?)",
                (pk, version, content, reason, stamp),
            )
            await session.queue(
                "DELETE FROM working_memory_versions WHERE document_pk = ? AND version <= ?",
                (pk, version - keep_versions),
            )
        return WorkingMemoryDocument(
            scope=key[1],
            owner_id=key[2],
            content=content,
            version=version,
            updated_at=now,
            reason=reason,
        )

    async def delete_document(self, *, tenant_id: str, scope: Scope, owner_id: str) -> None:
        key = check_document_key(tenant_id, scope, owner_id)
        async with self._dialect.write() as session:
            await session.queue(f"DELETE FROM working_memory WHERE {_KEY}", key)

    async def list_document_versions(
        self, *, tenant_id: str, scope: Scope, owner_id: str, limit: int = 20
    ) -> list[WorkingMemoryDocument]:
        key = check_document_key(tenant_id, scope, owner_id)
        _rows.check_page(limit, 0)
        async with self._dialect.read() as session:
            rows = await session.rows(
                f"{_VERSIONS} WHERE {_D_KEY} ORDER BY v.version DESC LIMIT ?", (*key, limit)
            )
        return [self._document(key[1], key[2], row) for row in rows]

    async def get_document_version(
        self, *, tenant_id: str, scope: Scope, owner_id: str, version: int
    ) -> WorkingMemoryDocument:
        key = check_document_key(tenant_id, scope, owner_id)
        check_version(version)
        async with self._dialect.read() as session:
            row = await session.row(
                f"{_VERSIONS} WHERE {_D_KEY} AND v.version = ?", (*key, version)
            )
        if row is None:
            raise NotFoundError("working memory version", str(version))
        return self._document(key[1], key[2], row)
