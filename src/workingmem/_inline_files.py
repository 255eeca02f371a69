"""A request's inline files kept under the size an upstream takes: older ones named, not resent.

    sent = within_file_bytes(messages, limit=24 * 2**20)

A window counts a file by what the model reads (a PDF by its pages), so a thread can hold many
of them in a few thousand tokens, while each is sent again as base64 with every call: a window
of forty PDFs of 800 KB is a request the providers refuse for its size (about 32 MB at OpenAI
and Anthropic), and every later call of the thread with it. Walking back from the newest
message, the files are kept while their base64 fits `limit`; an older message's files are then
named where they stood (``[file: report.pdf, attached earlier]``), so the model knows they were
there. The newest message (the question) keeps its own, whatever their size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .formats import ORIGINAL_KEY
from .formats.files import label
from .messages import carried_bytes, inline_bytes
from .types import MessageIn

__all__ = ["SHED_BYTES", "inline_bytes", "named_files", "shed", "within_file_bytes"]

SHED_BYTES = 64 * 2**10
"""A message whose files hold this much base64 or more is stored with a copy that names them
(`shed`): a window reads the copy, and the message whole only when its request sends them."""


def within_file_bytes(messages: Sequence[MessageIn], limit: int) -> Sequence[MessageIn]:
    """`messages` with the files of the older ones named instead of sent once the newer ones'
    base64 passes `limit` (see the module's docstring). A message so changed goes as its chat
    view: the original it carried for a native upstream (`ORIGINAL_KEY`) holds the same files.
    A request within the limit is `messages` itself (a window of text is looked at once)."""
    if sum(map(carried_bytes, messages)) <= limit:
        return messages
    kept = 0
    sent: list[MessageIn] = []
    for position, message in enumerate(reversed(messages)):
        size = carried_bytes(message)
        if position == 0 or kept + size <= limit:
            kept += size
            sent.append(message)
            continue
        sent.append(named_files(message))
    sent.reverse()
    return sent


def named_files(message: Mapping[str, Any]) -> dict[str, Any]:
    """`message` with its inline files named where they stood (``[file: report.pdf, attached
    earlier]``), as its chat view: the original it carried for a native upstream
    (`ORIGINAL_KEY`) holds the same files."""
    content = message.get("content")
    kept: dict[str, Any] = {k: v for k, v in message.items() if k != ORIGINAL_KEY}
    if not isinstance(content, list):
        return kept
    return {**kept, "content": [_named(part) if inline_bytes(part) else part for part in content]}


def shed(message: Mapping[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """The base64 of `message`'s inline files and the message with them named
    (`named_files`), when they hold `SHED_BYTES` or more; else None (kept whole)."""
    held = carried_bytes(message)
    return (held, named_files(message)) if held >= SHED_BYTES else None


def _named(part: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "text", "text": f"{label(part)[:-1]}, attached earlier]"}
