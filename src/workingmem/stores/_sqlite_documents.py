"""The SQL of working-memory documents on SQLite; `SQLiteStore` inherits it.

    store = await SQLiteStore.open("memory.db")
    doc = await store.put_document(tenant_id="t1", scope="user", owner_id="u1",
                                   content="...", expected_version=0)

Writes run in the store's `BEGIN IMMEDIATE` transactions, which SQLite serializes across
processes too, so reading the version and writing the next one cannot interleave with another
writer: the compare-and-set needs no row lock.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..errors import ConflictError, NotFoundError
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
    import aiosqlite

__all__ = ["SQLiteDocuments"]

_KEY = "tenant_id = ? AND scope = ? AND owner_id = ?"
_D_KEY = "d.tenant_id = ? AND d.scope = ? AND d.owner_id = ?"
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
        updated_at=datetime.fromisoformat(stamp),
        reason=reason,
    )


class SQLiteDocuments:
    """The DocumentStore methods of `SQLiteStore`."""

    if TYPE_CHECKING:

        def _write(self) -> AbstractAsyncContextManager[aiosqlite.Connection]: ...

        def _read(self) -> AbstractAsyncContextManager[aiosqlite.Connection]: ...

    async def get_document(
        self, *, tenant_id: str, scope: Scope, owner_id: str
    ) -> WorkingMemoryDocument:
        key = check_document_key(tenant_id, scope, owner_id)
        async with (
            self._read() as db,
            db.execute(
                "SELECT d.version, d.content, d.updated_at, v.reason FROM working_memory AS d "
                "LEFT JOIN working_memory_versions AS v "
                "ON v.document_pk = d.id AND v.version = d.version "
                f"WHERE {_D_KEY}",
                key,
            ) as cursor,
        ):
            row = await cursor.fetchone()
        if row is None:
            return WorkingMemoryDocument(scope=key[1], owner_id=key[2], content=None, version=0)
        return _document(key[1], key[2], tuple(row))

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
        stamp = _rows.utcnow().isoformat()
        async with self._write() as db:
            async with db.execute(
                f"SELECT id, version FROM working_memory WHERE {_KEY}", key
            ) as cursor:
                found = await cursor.fetchone()
            current = 0 if found is None else found[1]
            if expected_version is not None and current != expected_version:
                raise ConflictError(
                    f"working memory of {key[1]} {key[2]!r} is at version {current}, "
                    f"not {expected_version}"
                )
            version = current + 1
            if found is None:
                cursor = await db.execute(
                    "INSERT INTO working_memory (tenant_id, scope, owner_id, version, content, "
                    "updated_at) VALUES (?, ?, ?, ?, ?, ?)",
                    (*key, version, content, stamp),
                )
                pk = cursor.lastrowid
            else:
                pk = found[0]
                await db.execute(
                    "UPDATE working_memory SET version = ?, content = ?, updated_at = ? "
                    "WHERE id = ?",
                    (version, content, stamp, pk),
                )
            await db.execute(
                "INSERT INTO working_memory_versions (document_pk, version, content, reason, "
                "created_at) VALUES (?, ?, ?, ?, ?)",
                (pk, version, content, reason, stamp),
            )
            await db.execute(
                "DELETE FROM working_memory_versions WHERE document_pk = ? AND version <= ?",
                (pk, version - keep_versions),
            )
        return _document(key[1], key[2], (version, content, stamp, reason))

    async def delete_document(self, *, tenant_id: str, scope: Scope, owner_id: str) -> None:
        key = check_document_key(tenant_id, scope, owner_id)
        async with self._write() as db:
            await db.execute(f"DELETE FROM working_memory WHERE {_KEY}", key)

    async def list_document_versions(
        self, *, tenant_id: str, scope: Scope, owner_id: str, limit: int = 20
    ) -> list[WorkingMemoryDocument]:
        key = check_document_key(tenant_id, scope, owner_id)
        _rows.check_page(limit, 0)
        async with (
            self._read() as db,
            db.execute(
                f"{_VERSIONS} WHERE {_D_KEY} ORDER BY v.version DESC LIMIT ?",
                (*key, limit),
            ) as cursor,
        ):
            rows = await cursor.fetchall()
        return [_document(key[1], key[2], tuple(row)) for row in rows]

    async def get_document_version(
        self, *, tenant_id: str, scope: Scope, owner_id: str, version: int
    ) -> WorkingMemoryDocument:
        key = check_document_key(tenant_id, scope, owner_id)
        check_version(version)
        async with (
            self._read() as db,
            db.execute(
                f"{_VERSIONS} WHERE {_D_KEY} AND v.version = ?",
                (*key, version),
            ) as cursor,
        ):
            row = await cursor.fetchone()
        if row is None:
            raise NotFoundError("working memory version", str(version))
        return _document(key[1], key[2], tuple(row))
