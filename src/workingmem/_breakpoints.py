"""The client's prompt-cache breakpoints (``prompt_cache_breakpoint`` on a chat content
part, OpenAI's explicit cache marks) in what the gateway sends: only the newest few.

    sent = newest_breakpoints(messages)

A breakpoint is stored with its turn, as sent; a window then holds one from every request
that marked its newest message, where OpenAI takes at most `MAX_BREAKPOINTS` a request. The
newest are where the client's prompt ends now; older ones are dropped from what is sent (the
stored turns keep theirs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .types import MessageIn

__all__ = ["BREAKPOINT", "MAX_BREAKPOINTS", "newest_breakpoints"]

BREAKPOINT = "prompt_cache_breakpoint"
MAX_BREAKPOINTS = 4
"""What OpenAI takes in one request."""


def newest_breakpoints(
    messages: Sequence[MessageIn], limit: int = MAX_BREAKPOINTS
) -> Sequence[MessageIn]:
    """`messages` with the breakpoints of their parts but the newest `limit` left out; the
    messages themselves when they have no more (a window of text is looked at once)."""
    marked: list[int] = []
    marks = 0
    for index, message in enumerate(messages):
        content = message.get("content")
        if content.__class__ is not list:  # a text (most messages) has no parts to look at
            continue
        found = 0
        for part in content:
            if BREAKPOINT in part:
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
            if isinstance(part, dict) and BREAKPOINT in part:
                if kept == limit:
                    part = {key: value for key, value in part.items() if key != BREAKPOINT}
                else:
                    kept += 1
            parts.append(part)
        parts.reverse()
        sent[index] = {**sent[index], "content": parts}
    return sent
