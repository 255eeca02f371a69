"""A tenant's stored items found by their own ids (`ItemIndex`): where an ``item_reference`` of
a request that names no thread, or another thread, points. Kept as turns are written, popped and
deleted; another tenant's item is never found."""

from __future__ import annotations

from typing import Any

import pytest

import workingmem as wm
from tests.helpers import user
from workingmem.stores import ItemIndex, ItemPlace

pytestmark = pytest.mark.asyncio


def answer(*items: dict[str, Any]) -> wm.NativeItem:
    """An answer stored as the Responses route stores it: its items, each with its id."""
    return wm.NativeItem(
        format="openai.responses",
        item={"items": list(items)},
        message={"role": "assistant", "content": "It is sunny."},
    )


MESSAGE = {"id": "msg_sun", "type": "message", "role": "assistant", "content": []}
CALL = {"id": "fc_sun", "type": "function_call", "call_id": "c1", "name": "w", "arguments": "{}"}


def index(store: wm.Store) -> ItemIndex:
    assert isinstance(store, ItemIndex)
    return store


async def test_each_item_of_a_turn_is_found_where_it_is(store: wm.Store, tenant: str) -> None:
    await store.append(
        tenant_id=tenant,
        thread_id="th",
        messages=[user("Weather?"), answer(MESSAGE, CALL, {"type": "message", "content": []})],
    )

    assert await index(store).find_item(tenant_id=tenant, item_id="msg_sun") == ItemPlace("th", 2)
    assert await index(store).find_item(tenant_id=tenant, item_id="fc_sun") == ItemPlace("th", 2)
    assert await index(store).find_item(tenant_id=tenant, item_id="msg_none") is None
    assert await index(store).find_item(tenant_id="someone-else", item_id="msg_sun") is None


async def test_an_item_copied_into_a_newer_thread_is_found_there_unless_a_thread_is_named(
    store: wm.Store, tenant: str
) -> None:
    for thread in ("first", "fork"):
        await store.append(
            tenant_id=tenant, thread_id=thread, messages=[user("Hi"), answer(MESSAGE)]
        )

    found = index(store).find_item
    assert await found(tenant_id=tenant, item_id="msg_sun") == ItemPlace("fork", 2)
    assert await found(tenant_id=tenant, item_id="msg_sun", thread_id="first") == ItemPlace(
        "first", 2
    )
    assert (
        await found(tenant_id=tenant, item_id="msg_sun", thread_id="first", through_seq=1) is None
    )
    assert await found(tenant_id=tenant, item_id="msg_sun", thread_id="none") is None


async def test_an_item_leaves_the_index_with_its_turn(store: wm.Store, tenant: str) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=[user("Hi"), answer(MESSAGE)])
    await store.append(tenant_id=tenant, thread_id="gone", messages=[user("Hi"), answer(CALL)])

    await store.pop_turns(tenant_id=tenant, thread_id="th")
    await store.delete_thread(tenant_id=tenant, thread_id="gone")

    assert await index(store).find_item(tenant_id=tenant, item_id="msg_sun") is None
    assert await index(store).find_item(tenant_id=tenant, item_id="fc_sun") is None


async def test_items_of_any_shape_are_stored_and_only_ids_indexed(
    store: wm.Store, tenant: str
) -> None:
    """The index never refuses a turn: items that are not a list, items that are not objects,
    ids that are not strings, texts holding U+0000 (which PostgreSQL's JSON operators refuse,
    and which are indexed all the same)."""
    odd: list[dict[str, Any]] = [
        {"items": "not a list"},
        {"items": ["a", 1, None, {"id": 5}, {"id": "fc_\u0000"}]},
        {"items": [{"id": "msg_nul", "type": "message", "content": [{"text": "a\u0000b"}]}]},
        {"items": [{"id": "msg_fine", "type": "message", "content": []}]},
    ]
    view: wm.Message = {"role": "assistant", "content": "odd"}
    await store.append(
        tenant_id=tenant,
        thread_id="th",
        messages=[
            user("Hi"),
            *(wm.NativeItem(format="openai.responses", item=item, message=view) for item in odd),
        ],
    )

    assert len(await store.list_turns(tenant_id=tenant, thread_id="th")) == 5
    assert await index(store).find_item(tenant_id=tenant, item_id="msg_fine") == ItemPlace("th", 5)
    assert await index(store).find_item(tenant_id=tenant, item_id="msg_nul") == ItemPlace("th", 4)
