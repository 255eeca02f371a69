"""The ItemIndex protocol: which thread holds an item, by the item's own id.

    found = await store.find_item(tenant_id="t1", item_id="msg_6c0f...")
    found.thread_id, found.seq          # "trip", 12

A turn stored in the Responses API's format keeps its items, each with the id it was given
(the gateway's answers, the client's own). An ``item_reference`` names one of them; the
request it comes in may name no thread at all (a client that resends its history, as the AI
SDK does with its stored answers), or another thread of the tenant. Optional: a store without
it finds references only in the thread the request continues.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["ItemIndex", "ItemPlace"]


@dataclass(frozen=True, slots=True)
class ItemPlace:
    """Where an item is stored."""

    thread_id: str
    seq: int
    """The turn that holds it."""


@runtime_checkable
class ItemIndex(Protocol):
    """Finds a tenant's stored items by id."""

    async def find_item(
        self,
        *,
        tenant_id: str,
        item_id: str,
        thread_id: str | None = None,
        through_seq: int | None = None,
    ) -> ItemPlace | None:
        """The turn of the tenant's that holds an item of that id: in `thread_id` when given,
        at or before `through_seq` when given, else in the newest thread that has it (a fork
        copies its items); None when none does (another tenant's item included)."""
        ...
