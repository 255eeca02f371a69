"""The SQL of working-memory documents on PostgreSQL; `PostgresStore` inherits it.

    store = await PostgresStore.open("postgresql://app@db:5432/memory")
    doc = await store.put_document(tenant_id="t1", scope="user", owner_id="u1",
                                   content="...", expected_version=0)

A write first makes sure the document's row exists (``INSERT ... ON CONFLICT DO NOTHING``, so
two first writers do not both insert), then locks it (``SELECT ... FOR UPDATE``): reading the
version and writing the next one cannot interleave with another worker's write.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from ..errors import ConflictError, NotFoundError, StoreError
from . import _rows
from .documents import (
    DEFAULT_KEEP_VERSIONS,
    DocumentReason,
    Scope,
    WorkingMemoryDocument,
    check_document_key,
    check_keep_versions,
    check_version,
)

if TYPE_CHECKING:
    import psycopg

    Conn = psycopg.AsyncConnection[tuple[Any, ...]]

__all__ = ["PostgresDocuments"]

_KEY = "tenant_id = %s AND scope = %s AND owner_id = %s"
_D_KEY = "d.tenant_id = %s AND d.scope = %s AND d.owner_id = %s"
_VERSIONS = (
    "SELECT v.version, v.content, v.created_at, v.reason FROM working_memory_versions AS v "
    "JOIN working_memory AS d ON d.id = v.document_pk"
)


def _document(scope: Scope, owner: str, row: Any) -> WorkingMemoryDocument:
    version, content, stamp, reason = row
    return WorkingMemoryDocument(
        scope=scope,
        owner_id=owner,
        content=content,
        version=version,
        updated_at=stamp,
        reason=reason,
    )


class PostgresDocuments:
    """The DocumentStore methods of `PostgresStore`."""

    if TYPE_CHECKING:

        def _tx(self) -> AbstractAsyncContextManager[Conn]: ...

    async def get_document(
        self, *, tenant_id: str, scope: Scope, owner_id: str
    ) -> WorkingMemoryDocument:
        key = check_document_key(tenant_id, scope, owner_id)
        async with self._tx() as conn:
            cursor = await conn.execute(
                "SELECT d.version, d.content, d.updated_at, v.reason FROM working_memory AS d "
                "LEFT JOIN working_memory_versions AS v "
                f"ON v.document_pk = d.id AND v.version = d.version WHERE {_D_KEY}",
                key,
            )
            row = await cursor.fetchone()
        if row is None:
            return WorkingMemoryDocument(scope=key[1], owner_id=key[2], content=None, version=0)
        return _document(key[1], key[2], row)

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
        async with self._tx() as conn:
            await conn.execute(
                "INSERT INTO working_memory (tenant_id, scope, owner_id, version, content, "
                "updated_at) VALUES (%s, %s, %s, 0, NULL, %s) "
                "ON CONFLICT (tenant_id, scope, owner_id) DO NOTHING",
                (*key, now),
            )
            cursor = await conn.execute(
                f"SELECT id, version FROM working_memory WHERE {_KEY} FOR UPDATE", key
            )
            found = await cursor.fetchone()
            if found is None:  # inserted or kept just above, in this transaction
                raise StoreError(f"working memory of {key[1]} {key[2]!r} vanished mid-write")
            pk, current = found
            if expected_version is not None and current != expected_version:
                raise ConflictError(
                    f"working memory of {key[1]} {key[2]!r} is at version {current}, "
                    f"not {expected_version}"
                )
            version = current + 1
            await conn.execute(
                "UPDATE working_memory SET version = %s, content = %s, updated_at = %s "
                "WHERE id = %s",
                (version, content, now, pk),
            )
            await conn.execute(
                "INSERT INTO working_memory_versions (document_pk, version, content, reason, "
                "created_at) VALUES (%s, %s, %s, %s, %s)",
                (pk, version, content, reason, now),
            )
            await conn.execute(
                "DELETE FROM working_memory_versions WHERE document_pk = %s AND version <= %s",
                (pk, version - keep_versions),
            )
        return _document(key[1], key[2], (version, content, now, reason))

    async def delete_document(self, *, tenant_id: str, scope: Scope, owner_id: str) -> None:
        key = check_document_key(tenant_id, scope, owner_id)
        async with self._tx() as conn:
            await conn.execute(f"DELETE FROM working_memory WHERE {_KEY}", key)

    async def list_document_versions(
        self, *, tenant_id: str, scope: Scope, owner_id: str, limit: int = 20
    ) -> list[WorkingMemoryDocument]:
        key = check_document_key(tenant_id, scope, owner_id)
        _rows.check_page(limit, 0)
        async with self._tx() as conn:
            cursor = await conn.execute(
                f"{_VERSIONS} WHERE {_D_KEY} ORDER BY v.version DESC LIMIT %s",
                (*key, limit),
            )
            rows = await cursor.fetchall()
        return [_document(key[1], key[2], row) for row in rows]

    async def get_document_version(
        self, *, tenant_id: str, scope: Scope, owner_id: str, version: int
    ) -> WorkingMemoryDocument:
        key = check_document_key(tenant_id, scope, owner_id)
        check_version(version)
        async with self._tx() as conn:
            cursor = await conn.execute(
                f"{_VERSIONS} WHERE {_D_KEY} AND v.version = %s",
                (*key, version),
            )
            row = await cursor.fetchone()
        if row is None:
            raise NotFoundError("working memory version", str(version))
        return _document(key[1], key[2], row)
