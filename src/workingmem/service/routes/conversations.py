"""``/v1/conversations``: OpenAI's Conversations API over the gateway's threads.

    conversation = client.conversations.create(items=[{"role": "user", "content": "Hi"}])
    client.responses.create(model="gpt-4o-mini", input="And?", conversation=conversation.id)
    client.conversations.items.list(conversation.id, order="asc")

A conversation is a thread: one made here is ``conv_...``, and every thread of the tenant can
be named as one (its metadata ``{}`` until set). Items are stored as the thread's turns,
verbatim; deleting a conversation deletes the thread and everything of it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, Request

from ...errors import NotFoundError
from ...formats.responses import items_of, starts_with_output, turns_of
from ...formats.responses_chat import new_id
from ...stores.base import read_turns
from ...stores.responses import Conversation, ResponseStore
from ...types import NativeItem
from ..auth import Tenant
from ..params import (
    ItemIdPath,
    Page,
    ThreadIdPath,
    UserIdHeader,
    header_text,
)
from ..response_items import (
    item_with_id,
    list_items,
    locate,
    open_calls_before,
    stored_item,
    with_references,
)
from ..responses_schemas import (
    ConversationCreateRequest,
    ConversationUpdateRequest,
    ItemsCreateRequest,
    dumped,
)
from ..sessions import awaiting_key, copy_of, new_turns
from ..state import get_services
from . import BUSY, ERRORS
from .responses import records_of

__all__ = ["router"]

router = APIRouter(prefix="/v1/conversations", tags=["conversations"], responses=ERRORS)


async def _note_awaiting(
    records: ResponseStore,
    tenant: str,
    conversation_id: str,
    user_id: str | None,
    turns: Sequence[NativeItem],
) -> None:
    """The conversation is found by its newest turn: items that end with the user's turn (or
    a call's outputs) await an answer, items that end with an answer the client's next turn
    (`workingmem.service.sessions`)."""
    if turns:
        await records.mark_awaiting(
            tenant_id=tenant,
            conversation_id=conversation_id,
            key=awaiting_key(user_id, turns[-1].message),
        )


def _body(conversation: Conversation) -> dict[str, Any]:
    return {
        "id": conversation.conversation_id,
        "object": "conversation",
        "created_at": int(conversation.created_at.timestamp()),
        "metadata": conversation.metadata,
    }


@router.post("", summary="Create a conversation (a thread), with its first items")
async def create_conversation(
    body: ConversationCreateRequest,
    request: Request,
    tenant: Tenant,
    x_user_id: UserIdHeader = None,
) -> dict[str, Any]:
    services = get_services(request)
    records = records_of(services)
    items = dumped(body.items or [])
    conversation_id = new_id("conv")
    user_id = header_text(x_user_id)
    turns = turns_of(items)
    await services.gateway.store.append(
        tenant_id=tenant, thread_id=conversation_id, messages=turns, user_id=user_id
    )
    await _note_awaiting(records, tenant, conversation_id, user_id, turns)
    if body.metadata:
        found = await records.set_conversation_metadata(
            tenant_id=tenant, conversation_id=conversation_id, metadata=body.metadata
        )
    else:
        found = await records.get_conversation(tenant_id=tenant, conversation_id=conversation_id)
    return _body(found)


@router.get("/{conversation_id}", summary="A conversation")
async def get_conversation(
    conversation_id: ThreadIdPath, request: Request, tenant: Tenant
) -> dict[str, Any]:
    records = records_of(get_services(request))
    return _body(await records.get_conversation(tenant_id=tenant, conversation_id=conversation_id))


@router.post("/{conversation_id}", summary="Replace a conversation's metadata")
async def update_conversation(
    conversation_id: ThreadIdPath,
    body: ConversationUpdateRequest,
    request: Request,
    tenant: Tenant,
) -> dict[str, Any]:
    records = records_of(get_services(request))
    found = await records.set_conversation_metadata(
        tenant_id=tenant, conversation_id=conversation_id, metadata=body.metadata
    )
    return _body(found)


@router.delete("/{conversation_id}", summary="Delete a conversation and all of its thread")
async def delete_conversation(
    conversation_id: ThreadIdPath, request: Request, tenant: Tenant
) -> dict[str, Any]:
    services = get_services(request)
    records_of(services)
    await services.gateway.delete_thread(tenant_id=tenant, thread_id=conversation_id)
    return {"id": conversation_id, "object": "conversation.deleted", "deleted": True}


@router.post("/{conversation_id}/items", summary="Add items to a conversation", responses=BUSY)
async def create_items(
    conversation_id: ThreadIdPath,
    body: ItemsCreateRequest,
    request: Request,
    tenant: Tenant,
    x_user_id: UserIdHeader = None,
) -> dict[str, Any]:
    """Appends the items. Those that repeat the conversation's newest turns through the answer
    the gateway stored last (a session that saves a run's items after the gateway answered
    them) are not stored twice; a thread the gateway stored such a run in, found by how it
    opened, is forgotten once the conversation holds its turns. See
    `workingmem.service.sessions`."""
    services = get_services(request)
    records = records_of(services)
    store = services.gateway.store
    await records.get_conversation(tenant_id=tenant, conversation_id=conversation_id)
    items = await with_references(
        store, dumped(body.items), tenant_id=tenant, thread_id=conversation_id
    )
    answering: frozenset[str] = frozenset()
    if starts_with_output(items):
        answering = await open_calls_before(store, tenant_id=tenant, thread_id=conversation_id)
    turns = turns_of(items, open_calls=answering)
    user_id = header_text(x_user_id)
    repeated, fresh = await new_turns(
        store, tenant_id=tenant, thread_id=conversation_id, turns=turns
    )
    stored = await store.append(
        tenant_id=tenant, thread_id=conversation_id, messages=fresh, user_id=user_id
    )
    await _note_awaiting(records, tenant, conversation_id, user_id, turns)
    copy = await copy_of(
        records,
        store,
        tenant_id=tenant,
        conversation_id=conversation_id,
        user_id=user_id,
        turns=turns,
    )
    if copy is not None:
        with contextlib.suppress(NotFoundError):  # forgotten meanwhile
            await services.gateway.delete_thread(tenant_id=tenant, thread_id=copy)
    data = [
        item_with_id(item, turn.seq or 0, index)
        for turn in [*repeated, *stored]
        for index, item in enumerate(items_of(turn))
    ]
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"],
        "last_id": data[-1]["id"],
        "has_more": False,
    }


@router.get("/{conversation_id}/items", summary="A page of a conversation's items")
async def list_conversation_items(
    conversation_id: ThreadIdPath,
    request: Request,
    tenant: Tenant,
    page: Page,
) -> dict[str, Any]:
    store = get_services(request).gateway.store
    listed = await list_items(
        store,
        tenant_id=tenant,
        thread_id=conversation_id,
        order=page.order,
        after=page.after,
        limit=page.limit,
    )
    return listed.body()


@router.get("/{conversation_id}/items/{item_id}", summary="One item of a conversation")
async def get_item(
    conversation_id: ThreadIdPath, item_id: ItemIdPath, request: Request, tenant: Tenant
) -> dict[str, Any]:
    store = get_services(request).gateway.store
    seq, index, item = await stored_item(
        store, tenant_id=tenant, thread_id=conversation_id, item_id=item_id
    )
    return item_with_id(item, seq, index)


@router.delete("/{conversation_id}/items/{item_id}", summary="Delete one item of a conversation")
async def delete_item(
    conversation_id: ThreadIdPath, item_id: ItemIdPath, request: Request, tenant: Tenant
) -> dict[str, Any]:
    """Removes the item; the turns after it are stored again as the items that remain say
    (a call's output whose call is gone becomes an item of its own), and the summary rolls
    back to a version that covers only what stays."""
    services = get_services(request)
    records = records_of(services)
    store = services.gateway.store
    seq, index = await locate(store, tenant_id=tenant, thread_id=conversation_id, item_id=item_id)
    thread = await store.get_thread(tenant_id=tenant, thread_id=conversation_id)
    after = await read_turns(
        store,
        tenant_id=tenant,
        thread_id=conversation_id,
        first=seq,
        count=thread.turn_count - seq + 1,
    )
    rest = [item for turn in after for item in items_of(turn)]
    del rest[index]
    answering: frozenset[str] = frozenset()
    if starts_with_output(rest):
        answering = await open_calls_before(
            store, tenant_id=tenant, thread_id=conversation_id, seq=seq
        )
    await store.append(
        tenant_id=tenant,
        thread_id=conversation_id,
        messages=turns_of(rest, open_calls=answering),
        after_seq=seq - 1,
    )
    found = await records.get_conversation(tenant_id=tenant, conversation_id=conversation_id)
    return _body(found)
