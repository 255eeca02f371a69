"""The ResponseStore protocol: the Responses API's stored responses, and conversations' metadata.

    await store.put_response(tenant_id="t1", response=StoredResponse(...))
    record = await store.get_response(tenant_id="t1", response_id="resp_...")
    conversation = await store.get_conversation(tenant_id="t1", conversation_id="conv_...")

A response's items are turns of its thread (kept verbatim there); the record says where they
are (the seqs of its input and its output) and keeps the response object as it was returned,
for ``GET /v1/responses/{id}`` and for continuing from it (``previous_response_id``). A
conversation is a thread: every thread can be read as one, its metadata ``{}`` until set. Both
go with their thread (`TurnStore.delete_thread`). Keyed by tenant: another tenant's id is a
`NotFoundError`, exactly like a missing one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

__all__ = ["Conversation", "ResponseStore", "StoredResponse"]


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """One stored response of the Responses API."""

    response_id: str
    thread_id: str
    input_seq: int
    """The seq of the first turn of the request's input (its items are turns ``input_seq``
    through ``output_seq - 1``)."""
    output_seq: int
    """The seq of the first turn of the response's output."""
    last_seq: int
    """The seq of the output's last turn: continuing from this response continues after it
    (a fork when the thread has gone on since)."""
    body: dict[str, Any]
    """The response object as it was returned (``output`` included)."""
    carried_instructions: str | None = None
    """The system and developer messages its input opened with, after those of the response
    it continued: what continuing from it carries over (None: none)."""
    carried_tools: list[dict[str, Any]] | None = None
    """The tools its chain loaded (a tool search's output, an ``additional_tools`` item),
    after those of the response it continued: what continuing from it offers (None: none)."""
    answer_key: str | None = None
    """A key of its answer (`workingmem.service.sessions.awaiting_key`), kept for a response
    stored in a thread found by how its input opened: the conversation a session adds the
    answer to afterwards finds that thread by it (`find_answered`). None: not kept."""
    created_at: datetime | None = None
    """Set by the store."""


@dataclass(frozen=True, slots=True)
class Conversation:
    """A thread seen as a Conversations API conversation."""

    conversation_id: str
    created_at: datetime
    metadata: dict[str, str] = field(default_factory=dict)


@runtime_checkable
class ResponseStore(Protocol):
    """Stored responses and conversations' metadata, per tenant."""

    async def put_response(self, *, tenant_id: str, response: StoredResponse) -> None:
        """Stores a response record. `NotFoundError` when its thread does not exist (or is
        another tenant's); `ConflictError` when the id is taken."""
        ...

    async def get_response(self, *, tenant_id: str, response_id: str) -> StoredResponse:
        """The record, or `NotFoundError` (a missing id, or another tenant's)."""
        ...

    async def delete_response(self, *, tenant_id: str, response_id: str) -> None:
        """Deletes the record (its turns stay in the thread), or `NotFoundError`."""
        ...

    async def newest_response(self, *, tenant_id: str, thread_id: str) -> StoredResponse | None:
        """The thread's record whose output ends last (a conversation's newest response);
        None when it has none, or is no thread of the tenant's."""
        ...

    async def get_conversation(self, *, tenant_id: str, conversation_id: str) -> Conversation:
        """The thread as a conversation (metadata ``{}`` until set), or `NotFoundError`."""
        ...

    async def mark_awaiting(
        self, *, tenant_id: str, conversation_id: str, key: str, newest_seq: int | None = None
    ) -> None:
        """Notes that the conversation awaits an answer, under `key` (its newest turn's: see
        `workingmem.service.sessions`); the key replaces the one noted before. With
        `newest_seq` (the seq of the turn `key` names), only while that turn is the thread's
        newest: a mark written late, after another answer went on, leaves that answer's.
        `NotFoundError` when the thread does not exist."""
        ...

    async def find_awaiting(self, *, tenant_id: str, key: str) -> str | None:
        """The most recently updated conversation noted under `key`, or None."""
        ...

    async def find_answered(self, *, tenant_id: str, key: str) -> str | None:
        """The thread of the tenant's newest response stored under answer `key`
        (`StoredResponse.answer_key`), or None."""
        ...

    async def set_conversation_metadata(
        self, *, tenant_id: str, conversation_id: str, metadata: Mapping[str, str]
    ) -> Conversation:
        """Replaces the conversation's metadata. `NotFoundError` when the thread does not
        exist (or is another tenant's)."""
        ...
