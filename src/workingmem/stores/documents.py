"""The DocumentStore protocol: agent-editable working-memory documents, versioned.

    doc = await store.get_document(tenant_id="t1", scope="user", owner_id="u1")
    doc = await store.put_document(tenant_id="t1", scope="user", owner_id="u1",
                                   content="# Profile\\n- Name: Ada", expected_version=doc.version)
    versions = await store.list_document_versions(tenant_id="t1", scope="user", owner_id="u1")

A document is keyed by (tenant_id, scope, owner_id): the owner is the conversation (thread) id
for scope ``conversation`` and the user id for scope ``user``. The same owner id in two tenants,
or in two scopes, names two different documents. A conversation's document may exist before the
conversation's first turn: it is not tied to the threads table.

Every write is a new version (1, 2, ...) kept in the history, so a bad write can be shown and
rolled back; a write names the version it expects, and loses with `ConflictError` when another
writer got there first. `SQLiteStore` and `PostgresStore` implement this protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

from ..errors import ValidationError
from ..messages import check_id

__all__ = [
    "DEFAULT_KEEP_VERSIONS",
    "MEMORY_FILES_PREFIX",
    "DocumentReason",
    "DocumentStore",
    "Scope",
    "WorkingMemoryDocument",
    "check_document_key",
    "check_keep_versions",
    "check_version",
]

Scope = Literal["conversation", "user"]
"""Whose document it is: one conversation's, or one user's (shared by the user's threads)."""

DocumentReason = Literal["update", "clear", "rollback"]
"""Why a version exists."""

DEFAULT_KEEP_VERSIONS = 50
"""A write keeps this many of the newest versions of its document; older ones are pruned."""

_SCOPES: tuple[Scope, ...] = ("conversation", "user")

MEMORY_FILES_PREFIX = "memory-files:"
"""Owners of user-scope documents that hold a user's memory-tool files
(`workingmem.integrations.anthropic_memory`): an agent memory refuses user ids that start with
it, so the two never share a document."""


@dataclass(frozen=True, slots=True)
class WorkingMemoryDocument:
    """One version of a working-memory document (or the current one)."""

    scope: Scope
    """``conversation`` or ``user``."""
    owner_id: str
    """The conversation id (scope ``conversation``) or the user id (scope ``user``)."""
    content: str | None
    """The text (Markdown, free-form, or a JSON text in schema mode); None when never written
    or cleared."""
    version: int
    """1 for the first write, bumped by every write; 0 for a document never written."""
    updated_at: datetime | None = None
    """When this version was written (UTC); None for a document never written."""
    reason: DocumentReason | None = None
    """Why this version exists; None for a document never written."""


def check_document_key(
    tenant_id: object, scope: object, owner_id: object
) -> tuple[str, Scope, str]:
    """Validates the key every document call starts with; the owner is named by its scope."""
    tenant = check_id("tenant_id", tenant_id)
    if scope not in _SCOPES:
        raise ValidationError("scope", f"must be 'conversation' or 'user', got {scope!r}")
    checked: Scope = "conversation" if scope == "conversation" else "user"
    owner = check_id("conversation_id" if checked == "conversation" else "user_id", owner_id)
    return tenant, checked, owner


def check_keep_versions(keep_versions: int) -> None:
    if not 1 <= keep_versions <= 10_000:
        raise ValidationError("keep_versions", f"must be between 1 and 10000, got {keep_versions}")


def check_version(version: object) -> int:
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValidationError("version", f"must be a version number (1 or more), got {version!r}")
    return version


@runtime_checkable
class DocumentStore(Protocol):
    """Working-memory documents and their versions, per tenant."""

    async def get_document(
        self, *, tenant_id: str, scope: Scope, owner_id: str
    ) -> WorkingMemoryDocument:
        """The current document; version 0 with content None when it was never written."""
        ...

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
        """Writes the next version (content None clears the document), and returns it.

        With `expected_version`, only if the stored version is still that one (0 for a
        document never written), else `ConflictError` and nothing is written; None writes
        whatever the stored version is. One transaction: the document, its history row, and
        the pruning of versions beyond the newest `keep_versions`. The content is stored as
        given: validating it is the caller's job.
        """
        ...

    async def delete_document(self, *, tenant_id: str, scope: Scope, owner_id: str) -> None:
        """Erases the document and its whole history; the next write starts at version 1."""
        ...

    async def list_document_versions(
        self, *, tenant_id: str, scope: Scope, owner_id: str, limit: int = 20
    ) -> list[WorkingMemoryDocument]:
        """The kept versions, newest first."""
        ...

    async def get_document_version(
        self, *, tenant_id: str, scope: Scope, owner_id: str, version: int
    ) -> WorkingMemoryDocument:
        """One kept version, or `NotFoundError` (never written, pruned or erased)."""
        ...
