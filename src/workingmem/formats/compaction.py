"""The gateway's own compaction items: a conversation's summary and facts, carried by the client.

    item = compaction_item(item_id="cmp_...", summary="Ada plans a trip to Lyon.", facts=["..."])
    notes_of(item)      # Notes(summary=..., facts=(...)); None for an item another service wrote
    text_of_notes(...)  # what a model reads in the item's place

OpenAI's ``responses.compact`` answers a conversation's user messages and one ``compaction``
item whose ``encrypted_content`` only OpenAI can read. The gateway writes its own: the content
is ``wmc1.`` and the URL-safe base64 of ``{"summary": ..., "facts": [...]}``, so that any
upstream can be given what it says (a user message with the text, see `text_of_notes`) and a
later compaction can start from it. Not encrypted: it is the client's own conversation, and a
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


def compaction_item(*, item_id: str, summary: str, facts: Sequence[str]) -> dict[str, Any]:
    """The ``compaction`` item for a summary and its facts."""
    payload = json.dumps(
        {"summary": summary, "facts": [str(fact) for fact in facts]},
        ensure_ascii=False,
        separators=(",", ":"),
    )
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
    return Notes(summary, tuple(facts))


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
