"""A client's prompt-cache marks in what is sent upstream: only the newest ones an upstream
takes.

    sent = newest_marks(messages)                                   # OpenAI's, on its parts
    sent = newest_marks(messages, limit=3, key="cache_control")     # Claude's, on blocks

A mark is stored with its turn, as sent (``prompt_cache_breakpoint`` on an OpenAI content
part, of chat or Responses; ``cache_control`` on a Claude block), so a window holds one from
every request that marked its newest message. Anthropic refuses a request with more than
`MAX_BREAKPOINTS`; OpenAI writes the newest four of a request and matches the cache at the
newest `OPENAI_BREAKPOINTS` of the conversation, so more are of no use to it. The newest are
where the client's prompt ends now; older ones are left out of what is sent (the stored turns
keep theirs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

__all__ = ["BREAKPOINT", "MAX_BREAKPOINTS", "OPENAI_BREAKPOINTS", "newest_marks"]

BREAKPOINT = "prompt_cache_breakpoint"
"""OpenAI's mark on a content part."""
MAX_BREAKPOINTS = 4
"""The blocks marked ``cache_control`` a Messages request may have."""
OPENAI_BREAKPOINTS = 80
"""The newest marks of a conversation OpenAI matches its prompt cache at (it writes the newest
four of a request, three beside its implicit one, and takes the rest without error)."""

M = TypeVar("M", bound=Mapping[str, Any])


def newest_marks(
    messages: Sequence[M], limit: int = OPENAI_BREAKPOINTS, key: str = BREAKPOINT
) -> Sequence[M]:
    """`messages` (chat messages, Claude messages or Responses items: anything whose parts
    are its ``content`` list) with the marks `key` of their parts but the newest `limit` left
    out; the messages themselves when they have no more (a window of text is looked at once)."""
    marked: list[int] = []
    marks = 0
    for index, message in enumerate(messages):
        content = message.get("content")
        if content.__class__ is not list:  # a text (most messages) has no parts to look at
            continue
        found = 0
        for part in content:
            if isinstance(part, dict) and part.get(key) is not None:
                found += 1
        if found:
            marked.append(index)
            marks += found
    if marks <= limit:
        return messages
    sent = list(messages)
    kept = 0
    for index in reversed(marked):
        parts: list[Any] = []
        for part in reversed(sent[index]["content"]):
            if isinstance(part, dict) and part.get(key) is not None:
                if kept == limit:
                    part = {name: value for name, value in part.items() if name != key}
                else:
                    kept += 1
            parts.append(part)
        parts.reverse()
        sent[index] = {**sent[index], "content": parts}  # type: ignore[assignment]
    return sent
