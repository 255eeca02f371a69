"""Clients that keep their history in a conversation and send all of it to ``/v1/responses``.

    thread = await awaiting_thread(records, store, tenant_id="t1", user_id=None, request=views)
    repeated, fresh = await new_turns(store, tenant_id="t1", thread_id="conv_...", turns=turns)

The OpenAI Agents SDK's `OpenAIConversationsSession` works so: before each model call it adds
the new input to the conversation (``POST /v1/conversations/{id}/items``), then sends the whole
history as ``input`` with no ``conversation``, then adds the answer's items to the conversation.
Its TypeScript twin adds a run's input and output together, once the model answered them. The
gateway makes either one thread, each item stored once:

- a conversation is marked with a key of its newest turn. One whose items end with the user's
  turn (or a call's outputs) is *awaiting* an answer: a request that names no thread and ends
  with that turn continues it. One whose items end with an answer awaits the client's next
  turn: a request whose newest user turn follows that answer continues it. Either only when
  the request's input is the conversation's turns and then its own (checked, not guessed);
- items that repeat the conversation's newest turns through the answer the gateway stored
  last (the same turns, in order) are not stored again;
- a run that reached no conversation (the first of a session that adds its items afterwards)
  was stored in a thread found by how it opens, its response record keeping a key of its
  answer; when the items added to the conversation make it that thread's turns exactly, the
  copy is forgotten (`copy_of`): the conversation is the one thread, and the next request
  continues it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

from ..conversations import FAMILY_PREFIX, extends
from ..errors import NotFoundError
from ..formats.responses import FORMAT
from ..messages import common_start, overlap, said
from ..placement import opening, visible_turns
from ..stores.base import TurnStore
from ..stores.responses import ResponseStore
from ..types import Message, MessageIn, NativeItem, Turn

__all__ = ["awaiting_key", "awaiting_thread", "copy_of", "new_turns"]

_ANSWER_ID = re.compile(r"^(msg|fc)_[0-9a-f]{32}$")
"""The ids the gateway gives the items of an answer it made (`formats.responses_chat`)."""


def awaiting_key(user_id: str | None, newest: MessageIn) -> str:
    """The key a conversation is found by: its user and newest turn (an answer's, too: the
    key a response record keeps, `StoredResponse.answer_key`)."""
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
    """The conversation this request's input is, awaiting its answer or the turn that follows
    its newest answer; None when there is none."""
    for newest in _awaited(request):
        key = awaiting_key(user_id, newest)
        found = await records.find_awaiting(tenant_id=tenant_id, key=key)
        if found is not None and await extends(
            store, tenant_id=tenant_id, thread_id=found, request=request
        ):
            return found
    return None


def _awaited(request: Sequence[Message]) -> list[Message]:
    """The turns the conversation a request continues may end with: the request's last, and
    the answer its newest user turn follows (the client added its run's items after the
    answer; the run's own turns are not in the conversation yet)."""
    ends = list(request[-1:])
    users = [at for at, message in enumerate(request) if message.get("role") == "user"]
    if users and users[-1] > 0 and request[users[-1] - 1].get("role") == "assistant":
        ends.append(request[users[-1] - 1])
    return ends


async def new_turns(
    store: TurnStore, *, tenant_id: str, thread_id: str, turns: Sequence[NativeItem]
) -> tuple[list[Turn], list[NativeItem]]:
    """The stored turns that `turns` repeat (the thread's newest client-visible turns, through
    the answer the gateway stored last), and the rest."""
    thread = await store.get_thread(tenant_id=tenant_id, thread_id=thread_id)
    if not turns or not thread.turn_count:
        return [], list(turns)
    newest = await _newest_visible(store, tenant_id, thread_id, thread.turn_count, len(turns))
    repeated = overlap([turn.to_message() for turn in newest], [t.message for t in turns])
    if not repeated or not _is_answer(newest[-1].in_format(FORMAT)):
        return [], list(turns)
    return newest[-repeated:], list(turns[repeated:])


async def _newest_visible(
    store: TurnStore, tenant_id: str, thread_id: str, turn_count: int, count: int
) -> list[Turn]:
    """The thread's newest `count` client-visible turns (the gateway's own agent-memory
    rounds between them are not the client's: R30)."""
    size = count
    while True:
        first = max(1, turn_count - size + 1)
        shown = await visible_turns(
            store, tenant_id=tenant_id, thread_id=thread_id, first=first, count=size
        )
        if len(shown) >= count or first == 1:
            return shown[-count:]
        size *= 2


async def copy_of(
    records: ResponseStore,
    store: TurnStore,
    *,
    tenant_id: str,
    conversation_id: str,
    user_id: str | None,
    turns: Sequence[NativeItem],
) -> str | None:
    """The thread that the items just added (`turns`) made a copy of: found by how a request
    opened, answered last with their newest turn, and holding exactly the conversation's
    turns now. None when there is none. The thread the client names is never one."""
    if not turns or turns[-1].message.get("role") != "assistant":
        return None
    key = awaiting_key(user_id, turns[-1].message)
    found = await records.find_answered(tenant_id=tenant_id, key=key)
    if found is None or found == conversation_id or not found.startswith(FAMILY_PREFIX):
        return None
    thread = await store.get_thread(tenant_id=tenant_id, thread_id=conversation_id)
    need = thread.turn_count + 1  # one more than the conversation can show: a longer copy
    mine = [m for _, m in await opening(store, tenant_id, conversation_id, need)]
    try:
        theirs = [m for _, m in await opening(store, tenant_id, found, need)]
    except NotFoundError:
        return None
    if len(theirs) != len(mine) or common_start(theirs, mine) != len(mine):
        return None
    return found


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
