"""The compacted response a ``POST /v1/responses/compact`` returns.

    body = compacted_object(compaction, response_id="resp_...", created_at=1764967971)

As OpenAI answers it: the conversation's user messages, as listed items, then one
``compaction`` item that stands for everything else (the gateway's, readable by any upstream:
`workingmem.formats.compaction`). A client sends those items back as the input of its next
request in place of the history.
"""

from __future__ import annotations

from typing import Any

from ..compaction import Compaction
from ..formats.compaction import compaction_item
from ..formats.responses import is_user_message, items_of
from ..formats.responses_chat import new_id
from ..llm.usage import to_responses
from .response_items import item_with_id

__all__ = ["compacted_object", "item_of"]


def compacted_object(
    compaction: Compaction, *, response_id: str, created_at: int
) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response.compaction",
        "created_at": created_at,
        "output": [*_user_messages(compaction), item_of(compaction)],
        "usage": to_responses(compaction.compacted.usage),
    }


def item_of(compaction: Compaction) -> dict[str, Any]:
    """The compaction's ``compaction`` item, under a new id; of a thread's turns alone, it
    says so (the thread and its last turn): resent, it continues the thread."""
    of_thread = compaction.of_thread
    return compaction_item(
        item_id=new_id("cmp"),
        summary=compaction.compacted.summary,
        facts=compaction.compacted.facts,
        thread=compaction.thread_id if of_thread else None,
        through=compaction.stored if of_thread else None,
    )


def _user_messages(compaction: Compaction) -> list[dict[str, Any]]:
    """The user's messages of the conversation, in order, with their ids: a stored one's as
    listed (`item_with_id`), a new one's own or a new ``msg_`` id."""
    messages: list[dict[str, Any]] = []
    for turn in compaction.turns:
        seq = turn.seq or 0
        if turn.role != "user":
            continue
        for index, item in enumerate(items_of(turn)):
            if not is_user_message(item):
                continue  # a compaction, an output of a call no turn made: not the user's words
            if seq > compaction.stored and not item.get("id"):
                item = {"id": new_id("msg"), **item}
            messages.append(item_with_id(item, seq, index))
    return messages
