"""The gateway's own compaction items: a conversation's summary and facts, carried by the client.

    item = compaction_item(item_id="cmp_...", summary="Ada plans a trip to Lyon.", facts=["..."])
    notes_of(item)      # Notes(summary=..., facts=(...)); None for an item another service wrote
    text_of_notes(...)  # what a model reads in the item's place

OpenAI's ``responses.compact`` answers a conversation's user messages and one ``compaction``
item whose ``encrypted_content`` only OpenAI can read. The gateway writes its own: the content
is ``wmc1.`` and the URL-safe base64 of ``{"summary": ..., "facts": [...]}`` (and
``"thread"``, ``"through"`` when it stands for a thread's turns alone), so that any upstream
can be given what it says (a user message with the text, see `text_of_notes`), a later
compaction can start from it, and a history resent with it can continue its thread
(`workingmem.compaction.restored`). Not encrypted: it is the client's own conversation, and a
client could send the same words as a message. It is read as the user's words, never as
instructions (no system role), so an item made by hand gains nothing.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["COMPACTION", "Notes", "compaction_item", "is_ours", "notes_of", "text_of_notes"]

COMPACTION = "compaction"
"""The item type."""
_PREFIX = "wmc1."
_LEAD = "The conversation before this point, compacted:"


@dataclass(frozen=True, slots=True)
class Notes:
    """What a compaction item of the gateway's says."""

    summary: str
    facts: tuple[str, ...] = ()
    thread: str | None = None
    """The thread whose turns it stands for, when it stands for a thread's turns alone."""
    through: int | None = None
    """The seq of the last of those turns."""


def compaction_item(
    *,
    item_id: str,
    summary: str,
    facts: Sequence[str],
    thread: str | None = None,
    through: int | None = None,
) -> dict[str, Any]:
    """The ``compaction`` item for a summary and its facts; with `thread` and `through`, of
    that thread's turns up to `through` (a later request can be read as continuing it)."""
    fields: dict[str, Any] = {"summary": summary, "facts": [str(fact) for fact in facts]}
    if thread is not None and through is not None:
        fields.update(thread=thread, through=through)
    payload = json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
    content = _PREFIX + base64.urlsafe_b64encode(payload.encode()).decode()
    return {"id": item_id, "type": COMPACTION, "encrypted_content": content}


def notes_of(item: Mapping[str, Any]) -> Notes | None:
    """The notes of a compaction item the gateway wrote; None for any other item (OpenAI's
    own compaction, encrypted, or content that does not decode)."""
    if item.get("type") != COMPACTION:
        return None
    content = item.get("encrypted_content")
    if not isinstance(content, str) or not content.startswith(_PREFIX):
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(content[len(_PREFIX) :].encode()))
    except (binascii.Error, ValueError):
        return None
    if not isinstance(payload, dict):
        return None
    summary, facts = payload.get("summary"), payload.get("facts")
    if not isinstance(summary, str) or not isinstance(facts, list):
        return None
    if not all(isinstance(fact, str) for fact in facts):
        return None
    thread, through = payload.get("thread"), payload.get("through")
    if not (isinstance(thread, str) and type(through) is int and through >= 1):
        thread = through = None  # a mark that names no thread's turns is no mark
    return Notes(summary, tuple(facts), thread, through)


def is_ours(item: Mapping[str, Any]) -> bool:
    """Whether `item` is a compaction item the gateway wrote (no upstream can read it as is)."""
    return notes_of(item) is not None


def text_of_notes(notes: Notes) -> str:
    """What a model reads in a compaction item's place: a lead line, the summary, the facts."""
    parts = [_LEAD]
    if notes.summary.strip():
        parts.append(notes.summary.strip())
    if notes.facts:
        parts.append("Facts:\n" + "\n".join(f"- {fact}" for fact in notes.facts))
    return "\n\n".join(parts)
