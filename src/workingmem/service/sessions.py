"""Clients that keep their history in a conversation and send all of it to ``/v1/responses``.

    await note_items(records, store, tenant_id="t1", conversation_id="conv_...", ...)
    thread = await awaiting_thread(records, store, tenant_id="t1", user_id=None, request=views)

The OpenAI Agents SDK's `OpenAIConversationsSession` works so: before each model call it adds
the new input to the conversation (``POST /v1/conversations/{id}/items``), then sends the whole
history as ``input`` with no ``conversation``, then adds the answer's items to the conversation.
The gateway makes that one thread, each item stored once:

- a conversation whose items end with the user's turn (or a call's outputs) is *awaiting* an
  answer, under a key of its newest turn; a request that names no thread and ends with that turn
  continues it, when its input is the conversation's turns (checked, not guessed);
- items that repeat the answer the gateway stored last in the conversation (the same turns, in
  order) are not stored again.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

from ..conversations import extends
from ..formats.responses import FORMAT
from ..messages import overlap, said
from ..stores.base import TurnStore
from ..stores.responses import ResponseStore
from ..types import Message, MessageIn, NativeItem, Turn

__all__ = ["awaiting_key", "awaiting_thread", "new_turns"]

_ANSWER_ID = re.compile(r"^(msg|fc)_[0-9a-f]{32}$")
"""The ids the gateway gives the items of an answer it made (`formats.responses_chat`)."""


def awaiting_key(user_id: str | None, newest: MessageIn) -> str:
    """The key a conversation awaiting an answer is found by: its user and newest turn."""
    text = json.dumps([user_id, said(newest)], ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


async def awaiting_thread(
    records: ResponseStore,
    store: TurnStore,
    *,
    tenant_id: str,
    user_id: str | None,
    request: Sequence[Message],
) -> str | None:
    """The conversation this request's input is, awaiting its answer; None when there is none."""
    if not request:
        return None
    found = await records.find_awaiting(tenant_id=tenant_id, key=awaiting_key(user_id, request[-1]))
    if found is None:
        return None
    if not await extends(store, tenant_id=tenant_id, thread_id=found, request=request):
        return None
    return found


async def new_turns(
    store: TurnStore, *, tenant_id: str, thread_id: str, turns: Sequence[NativeItem]
) -> tuple[list[Turn], list[NativeItem]]:
    """The stored turns that `turns` repeat (the gateway's newest answer), and the rest."""
    thread = await store.get_thread(tenant_id=tenant_id, thread_id=thread_id)
    if not turns or not thread.turn_count:
        return [], list(turns)
    start = max(0, thread.turn_count - len(turns))
    newest = await store.list_turns(
        tenant_id=tenant_id, thread_id=thread_id, after_seq=start, limit=len(turns)
    )
    repeated = overlap([turn.to_message() for turn in newest], [t.message for t in turns])
    if not repeated or not all(_is_answer(turn.in_format(FORMAT)) for turn in newest[-repeated:]):
        return [], list(turns)
    return newest[-repeated:], list(turns[repeated:])


def _is_answer(original: dict[str, Any] | None) -> bool:
    items = original.get("items") if original else None
    return (
        isinstance(items, list)
        and bool(items)
        and all(
            isinstance(item, dict) and _ANSWER_ID.match(str(item.get("id", ""))) is not None
            for item in items
        )
    )
