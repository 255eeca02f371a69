"""The CompletionStore protocol: chat completions stored with ``store: true``.

    await store.put_completion(tenant_id="t1", completion=StoredCompletion(...), messages=[...])
    page = await store.list_completions(tenant_id="t1", metadata={"topic": "demo"}, limit=20)
    messages = await store.completion_messages(tenant_id="t1", completion_id="chatcmpl-...")

OpenAI keeps a chat completion asked for with ``store: true`` so that a client can list,
retrieve, tag and delete it, and read the messages it answered. The gateway keeps its own,
per tenant: the upstream's, reached through the gateway's one key, would show every tenant's.
A record keeps the completion object as it was returned and the request's messages as the
client sent them, and goes with its thread (`TurnStore.delete_thread`): forgetting a thread
forgets what its completions said. Keyed by tenant: another tenant's id is a `NotFoundError`,
exactly like a missing one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

__all__ = ["CompletionPage", "CompletionStore", "StoredCompletion"]


@dataclass(frozen=True, slots=True)
class StoredCompletion:
    """One stored chat completion."""

    completion_id: str
    thread_id: str
    """The thread the completion's turns were stored in."""
    model: str
    """The model that answered, as the completion names it (what a list filters by)."""
    body: dict[str, Any]
    """The chat completion object as it was returned."""
    metadata: dict[str, str] = field(default_factory=dict)
    created_at: datetime | None = None
    """Set by the store."""


@dataclass(frozen=True, slots=True)
class CompletionPage:
    """A page of a tenant's stored completions, in the order asked for."""

    completions: list[StoredCompletion]
    has_more: bool
    """Whether more follow the page's last."""


@runtime_checkable
class CompletionStore(Protocol):
    """Stored chat completions, per tenant."""

    async def put_completion(
        self,
        *,
        tenant_id: str,
        completion: StoredCompletion,
        messages: Sequence[Mapping[str, Any]],
    ) -> None:
        """Stores a completion and the messages of its request. `NotFoundError` when its
        thread does not exist (or is another tenant's); `ConflictError` when the id is taken;
        `ValidationError` for metadata OpenAI would refuse (`check_metadata`)."""
        ...

    async def get_completion(self, *, tenant_id: str, completion_id: str) -> StoredCompletion:
        """The record, or `NotFoundError` (a missing id, or another tenant's)."""
        ...

    async def list_completions(
        self,
        *,
        tenant_id: str,
        order: Literal["asc", "desc"] = "asc",
        after: str | None = None,
        limit: int = 20,
        model: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> CompletionPage:
        """A page of the tenant's completions in the order they were stored (``desc``: the
        newest first), those after the completion `after` (`NotFoundError` when it is not the
        tenant's), of `model` only, and with every pair of `metadata` only."""
        ...

    async def completion_messages(
        self, *, tenant_id: str, completion_id: str
    ) -> list[dict[str, Any]]:
        """The messages of the completion's request, as the client sent them, or
        `NotFoundError`."""
        ...

    async def set_completion_metadata(
        self, *, tenant_id: str, completion_id: str, metadata: Mapping[str, str]
    ) -> StoredCompletion:
        """Replaces the completion's metadata (the only thing of it that changes), or
        `NotFoundError`."""
        ...

    async def delete_completion(self, *, tenant_id: str, completion_id: str) -> None:
        """Deletes the record (its turns stay in the thread), or `NotFoundError`."""
        ...
