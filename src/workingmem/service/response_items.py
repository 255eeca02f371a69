"""A thread's turns as the Responses and Conversations APIs' items, with their ids.

    page = await list_items(store, tenant_id="t1", thread_id="conv_...", order="desc", limit=20)
    seq, index = await locate(store, tenant_id="t1", thread_id="conv_...", item_id="msg_...")

Items are kept verbatim in the turns (`workingmem.formats.responses`); an item given without an
id (a user's message, say) is listed with one that says where it is (``msg_wm12_0``: the
turn's seq and its place in the turn), so that it can be retrieved, deleted and paged after.
An item's own id is found by reading the thread back from its newest turn.

Only what the client saw is listed: the gateway's own agent-memory rounds (its tools' calls and
their results) are stored in the thread but are not the client's items (R30).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import NotFoundError
from ..formats.responses import OPEN_UNIT_READ, is_reference, items_of, open_calls
from ..messages import check_id
from ..placement import visible_turns
from ..stores.base import TurnStore
from ..stores.items import ItemIndex, ItemPlace
from ..types import Turn

__all__ = [
    "ItemPage",
    "item_with_id",
    "list_items",
    "locate",
    "open_calls_before",
    "stored_item",
    "with_references",
]

Order = Literal["asc", "desc"]

_PAGE = 100
_POSITION = re.compile(r"^[a-z]+_wm(\d+)_(\d+)$")
_PREFIXES = {"message": "msg", "function_call_output": "fco", "function_call": "fc"}
_WITH_STATUS = frozenset(
    {
        "message",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "computer_call",
        "computer_call_output",
        "shell_call",
        "shell_call_output",
        "local_shell_call",
        "apply_patch_call",
        "apply_patch_call_output",
        "tool_search_call",
        "tool_search_output",
        "program_output",
        "file_search_call",
        "web_search_call",
        "image_generation_call",
        "code_interpreter_call",
    }
)
"""The item types whose listed shape (the SDK's `ResponseItem`, `ConversationItem`) requires
a ``status``, which their input shape may leave out."""


@dataclass(frozen=True, slots=True)
class ItemPage:
    """A page of items, in OpenAI's list shape."""

    data: list[dict[str, Any]]
    has_more: bool

    def body(self) -> dict[str, Any]:
        return {
            "object": "list",
            "data": self.data,
            "first_id": self.data[0]["id"] if self.data else None,
            "last_id": self.data[-1]["id"] if self.data else None,
            "has_more": self.has_more,
        }


def item_with_id(item: dict[str, Any], seq: int, index: int) -> dict[str, Any]:
    """The item as listed: its own id, else one of its position; its type, and its status
    (``completed``) where the listed shape has one the client left out; a message's text
    content as its one part (``input_text``, or ``output_text`` for the assistant's), as
    OpenAI lists them."""
    kind = item.get("type", "message")
    listed = {"type": kind, **item}
    if not (isinstance(item.get("id"), str) and item["id"]):
        listed = {"id": f"{_PREFIXES.get(kind, 'item')}_wm{seq}_{index}", **listed}
    if kind in _WITH_STATUS and listed.get("status") is None:
        listed["status"] = "completed"
    if kind == "message" and isinstance(listed.get("content"), str):
        listed["content"] = [_part(listed.get("role"), listed["content"])]
    return listed


def _part(role: object, text: str) -> dict[str, Any]:
    if role == "assistant":
        return {"type": "output_text", "text": text, "annotations": []}
    return {"type": "input_text", "text": text}


def _items(turn: Turn) -> list[dict[str, Any]]:
    assert turn.seq is not None
    return [item_with_id(item, turn.seq, i) for i, item in enumerate(items_of(turn))]


async def _turns(
    store: TurnStore, tenant_id: str, thread_id: str, order: Order, first: int, last: int
) -> AsyncIterator[Turn]:
    """The client-visible turns with seq in [first, last], in `order`, a page at a time."""
    starts = range(first, last + 1, _PAGE)
    for start in starts if order == "asc" else reversed(starts):
        page = await visible_turns(
            store,
            tenant_id=tenant_id,
            thread_id=thread_id,
            first=start,
            count=min(_PAGE, last - start + 1),
        )
        for turn in page if order == "asc" else reversed(page):
            yield turn


async def list_items(
    store: TurnStore,
    *,
    tenant_id: str,
    thread_id: str,
    order: Order = "desc",
    after: str | None = None,
    limit: int = 20,
    first: int = 1,
    last: int | None = None,
) -> ItemPage:
    """A page of the items of turns `first`..`last` (the whole thread by default), `after`
    the item of that id (`NotFoundError` if it is not one of them)."""
    if last is None:
        last = (await store.get_thread(tenant_id=tenant_id, thread_id=thread_id)).turn_count
    if after is not None:
        seq, _ = await locate(
            store, tenant_id=tenant_id, thread_id=thread_id, item_id=after, first=first, last=last
        )
        if order == "asc":
            first = seq
        else:
            last = seq
    else:
        seq = 0
    data: list[dict[str, Any]] = []
    async for turn in _turns(store, tenant_id, thread_id, order, first, last):
        items = _items(turn)
        if order == "desc":
            items.reverse()
        if after is not None and turn.seq == seq:
            cut = next(i for i, item in enumerate(items) if item["id"] == after)
            items = items[cut + 1 :]
        for item in items:
            if len(data) == limit:
                return ItemPage(data, has_more=True)
            data.append(item)
    return ItemPage(data, has_more=False)


async def locate(
    store: TurnStore,
    *,
    tenant_id: str,
    thread_id: str,
    item_id: str,
    first: int = 1,
    last: int | None = None,
) -> tuple[int, int]:
    """The (seq, index in the turn) of the item; `NotFoundError` when the thread has none of
    that id (or the thread is missing, or another tenant's)."""
    turn, index = await _find(store, tenant_id, thread_id, item_id, first, last)
    assert turn.seq is not None
    return turn.seq, index


async def stored_item(
    store: TurnStore, *, tenant_id: str, thread_id: str, item_id: str, last: int | None = None
) -> tuple[int, int, dict[str, Any]]:
    """(seq, index, the item as it was stored) of the item of that id in turns 1..`last` (the
    whole thread by default); `NotFoundError` as `locate`."""
    turn, index = await _find(store, tenant_id, thread_id, item_id, 1, last)
    assert turn.seq is not None
    return turn.seq, index, items_of(turn)[index]


async def _find(
    store: TurnStore, tenant_id: str, thread_id: str, item_id: str, first: int, last: int | None
) -> tuple[Turn, int]:
    """The turn that holds the item, and the item's place in it (one read of the turn)."""
    if last is None:
        last = (await store.get_thread(tenant_id=tenant_id, thread_id=thread_id)).turn_count
    position = _POSITION.match(item_id)
    if position is not None:
        seq, index = int(position[1]), int(position[2])
        if first <= seq <= last:
            page = await visible_turns(
                store, tenant_id=tenant_id, thread_id=thread_id, first=seq, count=1
            )
            items = _items(page[0]) if page else []
            if index < len(items) and items[index]["id"] == item_id:
                return page[0], index
        raise NotFoundError("item", item_id)
    async for turn in _turns(store, tenant_id, thread_id, "desc", first, last):
        for index, item in enumerate(_items(turn)):
            if item["id"] == item_id:
                return turn, index
    raise NotFoundError("item", item_id)


async def with_references(
    store: TurnStore,
    items: Sequence[dict[str, Any]],
    *,
    tenant_id: str,
    thread_id: str | None,
    last: int | None = None,
) -> list[dict[str, Any]]:
    """The items, each ``item_reference`` replaced by the item it names as it was stored: an
    item of `thread_id` (the thread the request continues, up to turn `last`), else of any of
    the tenant's threads (`ItemIndex`: a request that names no thread, or another thread's
    item). A reference to an item the tenant does not have is a `NotFoundError` for the item,
    whichever other tenant has it; an id that could be no item's (empty, say) a
    `ValidationError`."""
    if not any(is_reference(item) for item in items):
        return list(items)
    if thread_id is not None and last is None:  # read once, not once a reference
        try:
            thread = await store.get_thread(tenant_id=tenant_id, thread_id=thread_id)
        except NotFoundError:
            thread_id = None  # a reference then names no item
        else:
            last = thread.turn_count
    resolved: list[dict[str, Any]] = []
    for place, item in enumerate(items):
        if not is_reference(item):
            resolved.append(item)
            continue
        item_id = check_id(f"input[{place}].id", item.get("id"))
        resolved.append(await _referenced(store, tenant_id, thread_id, item_id, last))
    return resolved


async def _referenced(
    store: TurnStore, tenant_id: str, thread_id: str | None, item_id: str, last: int | None
) -> dict[str, Any]:
    """The item of that id as it was stored: the thread's (through turn `last`), else wherever
    the tenant keeps it; a `NotFoundError` for the item (not for a thread) when the tenant has
    none. The index (`ItemIndex`) answers in one read however long the thread; the thread is
    read back only for an id that says where the item is (``msg_wm12_0``), which names an
    item of that thread alone, or when the store has no index."""
    if not isinstance(store, ItemIndex) or _POSITION.match(item_id):
        if thread_id is None:
            raise NotFoundError("item", item_id)
        try:
            _, _, item = await stored_item(
                store, tenant_id=tenant_id, thread_id=thread_id, item_id=item_id, last=last
            )
        except NotFoundError as exc:  # the thread's, too: the reference names an item
            raise NotFoundError("item", item_id) from exc
        return item
    tenant: dict[str, Any] = {}
    thread = {"thread_id": thread_id, "through_seq": last}
    for scope in [tenant] if thread_id is None else [thread, tenant]:  # the thread's first
        place = await store.find_item(tenant_id=tenant_id, item_id=item_id, **scope)
        found = await _item_at(store, tenant_id, place, item_id)
        if found is not None:
            return found
    raise NotFoundError("item", item_id)


async def _item_at(
    store: TurnStore, tenant_id: str, place: ItemPlace | None, item_id: str
) -> dict[str, Any] | None:
    """The item in the turn the index placed it in; None for no place, or a turn gone since."""
    if place is None:
        return None
    try:
        turn, at = await _find(store, tenant_id, place.thread_id, item_id, place.seq, place.seq)
    except NotFoundError:
        return None
    return items_of(turn)[at]


async def open_calls_before(
    store: TurnStore, *, tenant_id: str, thread_id: str, seq: int | None = None
) -> frozenset[str]:
    """The calls still open before turn `seq` (after the newest turn when None): what an
    output item placed there answers. A missing thread has none."""
    try:
        if seq is None:
            seq = (await store.get_thread(tenant_id=tenant_id, thread_id=thread_id)).turn_count + 1
    except NotFoundError:
        return frozenset()
    if seq <= 1:
        return frozenset()
    start = max(0, seq - 1 - OPEN_UNIT_READ)
    turns = await store.list_turns(
        tenant_id=tenant_id, thread_id=thread_id, after_seq=start, limit=seq - 1 - start
    )
    return open_calls(turns) if turns else frozenset()
