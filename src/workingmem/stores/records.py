"""The RecordStore protocol: what a thread's records are, beside its turns and its memory.

    kept = await store.count_records(tenant_id="t1", thread_id="trip")
    kept.responses, kept.chat_completions    # 2, 1

The Responses API's stored responses and the chat completions kept with ``store: true`` are
copies of a thread's exchanges, kept for the client to read back; they go with the thread
(`TurnStore.delete_thread`). The web page says how many there are before it deletes one.
Optional: a store without it is a store whose page says nothing of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["KeptRecords", "RecordStore"]


@dataclass(frozen=True, slots=True)
class KeptRecords:
    """The records kept of a thread's exchanges."""

    responses: int
    """Stored Responses API responses."""
    chat_completions: int
    """Chat completions stored with ``store: true``."""


@runtime_checkable
class RecordStore(Protocol):
    """Counts a thread's records."""

    async def count_records(self, *, tenant_id: str, thread_id: str) -> KeptRecords:
        """The thread's records; `NotFoundError` for a missing thread (or another tenant's)."""
        ...
