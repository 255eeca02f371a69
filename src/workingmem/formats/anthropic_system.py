"""Anthropic's ``system`` messages among a request's messages (Claude Code sends the
environment it runs in so, after the user's message): instructions for the call, not turns of
the thread. Their texts join the request's ``system`` in the call's system prompt, in order;
one whose ``clear_at`` is ``next_user_message`` counts only until a user message follows it;
the ``output_config`` of those in force applies to the call, over the request's own.

    prompt = instructions(system, messages)       # the request's system, then theirs
    config = output_config(messages, body_config)  # {"effort": "medium"}

The client sends them again with every call, as it sends its ``system``: the thread stores
none of them (`workingmem.formats.anthropic.turns_of` passes them by).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ValidationError
from . import joined_instructions

__all__ = ["SYSTEM_ROLE", "in_force", "instructions", "output_config", "system_texts"]

SYSTEM_ROLE = "system"


def in_force(messages: Sequence[Mapping[str, Any]]) -> list[tuple[int, Mapping[str, Any]]]:
    """The system messages that still speak to the model, with their places: all but those
    cleared by a later user message (``clear_at: "next_user_message"``)."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    return [
        (index, message)
        for index, message in enumerate(messages)
        if message.get("role") == SYSTEM_ROLE
        and not (message.get("clear_at") == "next_user_message" and index < last_user)
    ]


def system_texts(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The texts of the system messages in force, in order. A block that adds or withdraws a
    tool mid-conversation is refused, named: the gateway offers the request's ``tools``."""
    texts: list[str] = []
    for index, message in in_force(messages):
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
            continue
        for place, block in enumerate(content or ()):
            kind = block.get("type")
            if kind != "text":
                raise ValidationError(
                    f"messages[{index}].content[{place}].type",
                    f"{kind!r} blocks are not served in a system message: only text is (give "
                    "the model its tools in `tools`)",
                )
            texts.append(str(block.get("text", "")))
    return [text for text in texts if text]


def instructions(system: str | None, messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The call's system prompt: the request's `system`, then the system messages' texts
    (None: neither says anything, the profile's prompt holds)."""
    return joined_instructions(system, *system_texts(messages))


def output_config(
    messages: Sequence[Mapping[str, Any]], given: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """The call's ``output_config``: the request's, with the fields of each system message in
    force over it (the newest last)."""
    merged = dict(given or {})
    for _, message in in_force(messages):
        merged.update(message.get("output_config") or {})
    return merged or None
