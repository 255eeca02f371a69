"""AgentMemory: a working memory that the model edits with tools (spec 003).

    agent_memory = AgentMemory(store=store, config=AgentMemoryConfig(schema=Notes, scope="user"))
    system += await agent_memory.get_working_memory_instructions(
        tenant_id="t1", conversation_id="c1", user_id="u1")
    response = client.chat.completions.create(..., tools=agent_memory.openai_tools())
    text = await agent_memory.execute_tool(call.function.name, call.function.arguments,
                                           tenant_id="t1", conversation_id="c1", user_id="u1")

What it decides, once for every caller:

- Ids. The scope picks the owner of the document: ``conversation`` needs `conversation_id`,
  ``user`` needs `user_id` (the other id is not used). A missing id raises `ValidationError`
  naming it, never falls back to a shared document; `get_working_memory_instructions` alone
  returns "" then, since a request without that id simply has no working memory.
- The template. `get_working_memory` returns what is stored, None until the first write; the
  model meets the template as its starting content, in the instruction block and in the
  `get_working_memory` tool's answer while nothing is stored.
- Updates. Text modes replace the whole document; schema mode merges (see `merge`), or
  replaces with ``replace=True``. Every update is a compare-and-set on the document's version:
  without `expected_version`, a lost race re-reads and re-applies (a merge against the newer
  document is still right; a whole replacement is the last writer's, and the version it
  replaced stays in the history); with `expected_version`, a lost race raises `ConflictError`.
- Clearing writes an empty version (the history keeps the older ones, so a mistaken clear can
  be rolled back); ``erase_history=True`` deletes the document and its whole history.
- Disabled (``enabled=False``): no tools, an empty instruction block, reads give nothing,
  updates and roll backs raise `ValidationError`; clearing still works, so that a user can
  always make the memory forget.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import ConflictError, ValidationError
from ..messages import check_id
from ..stores.documents import (
    MEMORY_FILES_PREFIX,
    DocumentStore,
    Scope,
    WorkingMemoryDocument,
    check_version,
)
from . import tools
from .config import AgentMemoryConfig
from .instructions import render_instructions
from .modes import Format, SchemaMode

__all__ = ["AgentMemory", "WorkingMemoryUpdate"]

_ATTEMPTS = 10
"""A lost race means another write landed, so with at most this many writers at once every
update lands within this many attempts."""


@dataclass(frozen=True, slots=True)
class WorkingMemoryUpdate:
    """What an update did."""

    document: WorkingMemoryDocument
    """The stored document after the update."""
    changed: bool
    """False when the update left the document as it was (no new version was written)."""
    ignored_nulls: tuple[str, ...] = ()
    """Schema mode: the JSON paths whose null meant "no change"."""


class AgentMemory:
    """The working memory of spec 003 over a `DocumentStore` (`SQLiteStore`, `PostgresStore`)."""

    def __init__(self, *, store: DocumentStore, config: AgentMemoryConfig | None = None) -> None:
        self.store = store
        self.config = config or AgentMemoryConfig()

    def document_key(
        self, *, tenant_id: str, conversation_id: str | None = None, user_id: str | None = None
    ) -> tuple[str, Scope, str]:
        """(tenant_id, scope, owner id) of the document these ids name, or `ValidationError`."""
        tenant = check_id("tenant_id", tenant_id)
        scope = self.config.scope
        if scope == "user":
            if user_id is None:
                raise ValidationError(
                    "user_id", "is required: this working memory is per user (scope='user')"
                )
            user = check_id("user_id", user_id)
            if user.startswith(MEMORY_FILES_PREFIX):
                raise ValidationError(
                    "user_id",
                    f"must not start with {MEMORY_FILES_PREFIX!r} (reserved for the "
                    "memory tool's files)",
                )
            return tenant, scope, user
        if conversation_id is None:
            raise ValidationError(
                "conversation_id",
                "is required: this working memory is per conversation (scope='conversation')",
            )
        return tenant, scope, check_id("conversation_id", conversation_id)

    # -- reading -----------------------------------------------------------------------------

    async def get_working_memory(
        self, *, tenant_id: str, conversation_id: str | None = None, user_id: str | None = None
    ) -> str | None:
        """The stored content (a JSON text in schema mode); None when empty or disabled."""
        document = await self.get_working_memory_document(
            tenant_id=tenant_id, conversation_id=conversation_id, user_id=user_id
        )
        return document.content

    async def get_working_memory_document(
        self, *, tenant_id: str, conversation_id: str | None = None, user_id: str | None = None
    ) -> WorkingMemoryDocument:
        """The stored document with its version (the one to pass as `expected_version`)."""
        tenant, scope, owner = self.document_key(
            tenant_id=tenant_id, conversation_id=conversation_id, user_id=user_id
        )
        if not self.config.enabled:
            return WorkingMemoryDocument(scope=scope, owner_id=owner, content=None, version=0)
        return await self.store.get_document(tenant_id=tenant, scope=scope, owner_id=owner)

    async def get_working_memory_history(
        self,
        *,
        tenant_id: str,
        conversation_id: str | None = None,
        user_id: str | None = None,
        limit: int = 20,
    ) -> list[WorkingMemoryDocument]:
        """The kept versions, newest first (`AgentMemoryConfig.keep_versions` of them)."""
        tenant, scope, owner = self.document_key(
            tenant_id=tenant_id, conversation_id=conversation_id, user_id=user_id
        )
        if not self.config.enabled:
            return []
        return await self.store.list_document_versions(
            tenant_id=tenant, scope=scope, owner_id=owner, limit=limit
        )

    def get_working_memory_format(self) -> Literal["markdown", "json"] | None:
        """``markdown`` (template), ``json`` (schema), or None (free-form)."""
        fmt: Format | None = self.config.mode.format
        return fmt

    def get_working_memory_template(self) -> str | None:
        """The Markdown template, or None."""
        return self.config.mode.template

    def get_working_memory_schema(self) -> dict[str, Any] | None:
        """The JSON Schema of schema mode (a Pydantic model's, as JSON Schema), or None."""
        mode = self.config.mode
        return mode.schema.json_schema if isinstance(mode, SchemaMode) else None

    async def get_working_memory_instructions(
        self,
        *,
        tenant_id: str,
        conversation_id: str | None = None,
        user_id: str | None = None,
        editable: bool = True,
    ) -> str:
        """The block for the system prompt; "" when disabled or when the scope's id is None.
        Not `editable` (the model is offered no tools): the content alone, "" when empty."""
        if not self.config.enabled:
            return ""
        needed = user_id if self.config.scope == "user" else conversation_id
        if needed is None:
            return ""
        content = await self.get_working_memory(
            tenant_id=tenant_id, conversation_id=conversation_id, user_id=user_id
        )
        return render_instructions(
            mode=self.config.mode, scope=self.config.scope, content=content, editable=editable
        )

    # -- writing -----------------------------------------------------------------------------

    async def update_working_memory(
        self,
        *,
        tenant_id: str,
        conversation_id: str | None = None,
        user_id: str | None = None,
        content: object,
        replace: bool = False,
        expected_version: int | None = None,
    ) -> WorkingMemoryUpdate:
        """Validates and stores an update; invalid content raises `ValidationError` and
        changes nothing.

        Args:
            content: text (template and free-form modes: the whole document); in schema mode a
                dict, a Pydantic model instance or a JSON text, merged into the stored document.
            replace: schema mode: store `content` as the whole document instead of merging.
            expected_version: apply only to this version (see `get_working_memory_document`),
                else `ConflictError`; None re-reads and re-applies after a lost race.
        """
        tenant, scope, owner = self._writable(tenant_id, conversation_id, user_id)
        if expected_version is not None and expected_version != 0:
            check_version(expected_version)
        mode = self.config.mode
        for attempt in range(_ATTEMPTS):
            current = await self.store.get_document(tenant_id=tenant, scope=scope, owner_id=owner)
            if expected_version is not None and current.version != expected_version:
                raise ConflictError(
                    f"working memory of {scope} {owner!r} is at version {current.version}, "
                    f"not {expected_version}"
                )
            update = mode.apply(current=current.content, content=content, replace=replace)
            if update.content == current.content:
                return WorkingMemoryUpdate(
                    current, changed=False, ignored_nulls=update.ignored_nulls
                )
            try:
                saved = await self.store.put_document(
                    tenant_id=tenant,
                    scope=scope,
                    owner_id=owner,
                    content=update.content,
                    expected_version=current.version,
                    keep_versions=self.config.keep_versions,
                )
            except ConflictError:
                if expected_version is not None:
                    raise
                await asyncio.sleep(random.uniform(0, 0.005 * (attempt + 1)))
                continue
            return WorkingMemoryUpdate(saved, changed=True, ignored_nulls=update.ignored_nulls)
        raise ConflictError(
            f"working memory of {scope} {owner!r} changed under {_ATTEMPTS} attempts to update it"
        )

    async def clear_working_memory(
        self,
        *,
        tenant_id: str,
        conversation_id: str | None = None,
        user_id: str | None = None,
        erase_history: bool = False,
    ) -> None:
        """Empties the document: a later get returns None, the next instruction block shows
        nothing of it. `erase_history` also deletes every kept version."""
        tenant, scope, owner = self.document_key(
            tenant_id=tenant_id, conversation_id=conversation_id, user_id=user_id
        )
        if erase_history:
            await self.store.delete_document(tenant_id=tenant, scope=scope, owner_id=owner)
            return
        current = await self.store.get_document(tenant_id=tenant, scope=scope, owner_id=owner)
        if current.content is None:
            return  # never written, or already clear: no version to add
        await self.store.put_document(
            tenant_id=tenant,
            scope=scope,
            owner_id=owner,
            content=None,
            expected_version=None,
            reason="clear",
            keep_versions=self.config.keep_versions,
        )

    async def rollback_working_memory(
        self,
        *,
        tenant_id: str,
        conversation_id: str | None = None,
        user_id: str | None = None,
        version: int,
    ) -> WorkingMemoryDocument:
        """Makes a kept version current again, as a new version (the history keeps all).

        The old content is checked against today's mode first (a schema or a cap may have
        changed since): `ValidationError` then, and nothing changes. `NotFoundError` for a
        version that is not kept.
        """
        tenant, scope, owner = self._writable(tenant_id, conversation_id, user_id)
        target = await self.store.get_document_version(
            tenant_id=tenant, scope=scope, owner_id=owner, version=check_version(version)
        )
        if target.content is not None:
            self.config.mode.check(target.content)
        return await self.store.put_document(
            tenant_id=tenant,
            scope=scope,
            owner_id=owner,
            content=target.content,
            expected_version=None,
            reason="rollback",
            keep_versions=self.config.keep_versions,
        )

    def _writable(
        self, tenant_id: str, conversation_id: str | None, user_id: str | None
    ) -> tuple[str, Scope, str]:
        key = self.document_key(
            tenant_id=tenant_id, conversation_id=conversation_id, user_id=user_id
        )
        if not self.config.enabled:
            raise ValidationError(
                "enabled", "working memory is disabled (AgentMemoryConfig(enabled=False))"
            )
        return key

    # -- tools -------------------------------------------------------------------------------

    def openai_tools(self) -> list[dict[str, Any]]:
        """The three tools in the OpenAI function-calling format; [] when disabled."""
        return tools.openai_tools(self.config.mode) if self.config.enabled else []

    def anthropic_tools(self) -> list[dict[str, Any]]:
        """The three tools in Anthropic's tool format; [] when disabled."""
        return tools.anthropic_tools(self.config.mode) if self.config.enabled else []

    async def execute_tool(
        self,
        name: str,
        arguments: object,
        *,
        tenant_id: str,
        conversation_id: str | None = None,
        user_id: str | None = None,
    ) -> str:
        """Runs a model's call of one of the tools; returns the text for the tool result.

        `arguments` as the model sent them: a JSON text, a dict, None. The ids come from the
        application; the model's arguments never choose the document.
        """
        return await tools.execute_tool(
            self,
            name,
            arguments,
            tenant_id=tenant_id,
            conversation_id=conversation_id,
            user_id=user_id,
        )
