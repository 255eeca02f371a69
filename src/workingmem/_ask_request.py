"""An ask's request: the turns a host or a client gave, checked once before anything is locked
or written, and the same turns as an upstream takes them.

    request = request_turns(None, [{"role": "user", "content": "And in May?"}])
    request.items, request.views   # as given (native items kept), and their chat views
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import ValidationError
from .formats import carrying
from .messages import normalize_turns
from .types import Message, MessageIn, NativeItem

__all__ = ["AskRequest", "as_upstream_message", "request_turns"]


@dataclass(frozen=True, slots=True)
class AskRequest:
    """A request's turns as given (native items kept) and their validated chat views."""

    items: list[MessageIn | NativeItem]
    views: list[Message]
    tools: list[dict[str, Any]] = field(default_factory=list)
    """The client's own tools."""


def request_turns(
    message: str | MessageIn | None, messages: Sequence[MessageIn | NativeItem] | None
) -> AskRequest:
    """The request's turns: `message` alone, or `messages`, whose last must be the user's, the
    results of the client's tool calls, or an assistant's text after one of those."""
    if (message is None) == (messages is None):
        raise ValidationError("message", "give either message or messages")
    items: list[MessageIn | NativeItem] = (
        [_user_message(message)] if message is not None else list(messages or ())
    )
    views, _ = normalize_turns(items, "message" if message is not None else "messages", texts=False)
    if not views or not (views[-1]["role"] in ("user", "tool") or _goes_on(views)):
        raise ValidationError(
            "messages",
            "the last message must be the user's, the results of the client's tool calls, or "
            "an assistant's text after them for the model to go on from: it is what the model "
            "answers",
        )
    return AskRequest(items=items, views=views)


def _goes_on(views: Sequence[Message]) -> bool:
    """Whether the request ends with an assistant's text after a user's message or tool
    results: Anthropic's prefill (the model goes on from it), a front end's "continue" of an
    answer cut short. Stored as the turn it is; the answer is the next turn."""
    last = views[-1]
    if last["role"] != "assistant" or last.get("tool_calls") or len(views) < 2:
        return False
    return views[-2]["role"] in ("user", "tool")


def as_upstream_message(item: MessageIn | NativeItem, native: str | None) -> MessageIn:
    """A request's turn as a message to an upstream: a native item's view, carrying the item
    (`formats.ORIGINAL_KEY`) for a client that speaks its format (`native`)."""
    if not isinstance(item, NativeItem):
        return item
    return carrying(item.message, item.item if item.format == native else None)


def _user_message(message: str | MessageIn) -> MessageIn:
    if isinstance(message, str):
        return {"role": "user", "content": message}
    if isinstance(message, dict) and message.get("role", "user") == "user":
        return {**message, "role": "user"}
    raise ValidationError("message", "must be the user's text or a user message dict")
