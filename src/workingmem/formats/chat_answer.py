"""A chat upstream's answer as the thread stores it: with the fields of its own that the chat
view leaves out, which the upstream asks back.

    turn = answer_item(message, completion.own_fields)  # the message, or a chat NativeItem
    turn = with_chat_original(blocks, message, completion.own_fields)  # another format's

Some servers put more in an answer than OpenAI's chat message has, and refuse the next request
without it: DeepSeek's thinking mode its ``reasoning_content`` (once the model called a tool,
on every later request), Gemini 3 a call's ``extra_content`` (its thought signature, within the
turn). Such an answer is stored as an item of chat's own format beside its view; the store's
tail read gives the item back (`CountedTurn.original`), so the window sends it as it came. An
answer stored in its client's format (a Responses client's items, an Anthropic client's blocks)
carries it under `CHAT_ORIGINAL_KEY` (`with_chat_original`). An answer with nothing of its own
stays as it was: OpenAI's answers, most servers'.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..types import CHAT_FORMAT, CHAT_ORIGINAL_KEY, Message, MessageIn, NativeItem, Turn

__all__ = [
    "CALL_FIELDS",
    "MESSAGE_FIELDS",
    "REASONING_FIELDS",
    "answer_item",
    "call_fields",
    "chat_original",
    "own_fields",
    "reasoning_of",
    "with_chat_original",
    "with_own_fields",
]

MESSAGE_FIELDS = frozenset(
    {
        *("role", "content", "name", "refusal", "annotations", "audio"),
        *("tool_calls", "tool_call_id", "function_call"),
    }
)
"""The fields of OpenAI's chat messages; any other a message has is its writer's own."""
CALL_FIELDS = frozenset({"id", "type", "function", "index"})
"""The fields of OpenAI's tool call, and the stream's ``index``."""
REASONING_FIELDS = ("reasoning_content", "reasoning")
"""Where chat servers put a reasoning model's thinking as text: DeepSeek, llama.cpp's server and
older vLLM ``reasoning_content``; OpenRouter, Ollama, Groq and newer vLLM ``reasoning``."""


def own_fields(message: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of an answer `message` that OpenAI's chat message does not have, those
    with something in them."""
    return {k: v for k, v in message.items() if k not in MESSAGE_FIELDS and _said(v)}


def call_fields(call: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a tool call that OpenAI's does not have (Gemini's ``extra_content``)."""
    return {k: v for k, v in call.items() if k not in CALL_FIELDS and _said(v)}


def reasoning_of(fields: Mapping[str, Any] | None) -> str:
    """The thinking an answer's own fields (`Completion.own_fields`) or one streamed delta
    carry as text (`REASONING_FIELDS`), "" when none: what a Responses client is shown as a
    reasoning item and an Anthropic client as a thinking block."""
    for name in REASONING_FIELDS:
        value = (fields or {}).get(name)
        if isinstance(value, str) and value:
            return value
    return ""


def answer_item(message: Message, fields: Mapping[str, Any] | None) -> MessageIn | NativeItem:
    """The answer `message` (its calls as the upstream gave them) as the thread stores it:
    with the upstream's own `fields` (`Completion.own_fields`) and its calls' own fields in
    an item of chat's format, beside the view without them; `message` itself when there are
    none."""
    calls = message.get("tool_calls") or []
    if not fields and not any(call_fields(call) for call in calls):
        return message
    view: dict[str, Any] = dict(message)
    if calls:
        view["tool_calls"] = [{k: v for k, v in c.items() if k in CALL_FIELDS} for c in calls]
    return NativeItem(CHAT_FORMAT, {**message, **(fields or {})}, view)


def with_chat_original(
    turn: MessageIn | NativeItem, message: Message, fields: Mapping[str, Any] | None
) -> MessageIn | NativeItem:
    """The answer `turn` as its client's API stores it, carrying the chat upstream's answer
    `message` with the upstream's own `fields` when there are any (`answer_item`): as that item
    itself when `turn` is a chat message, else under `CHAT_ORIGINAL_KEY` in `turn`'s item."""
    chat = answer_item(message, fields)
    if not isinstance(chat, NativeItem) or (
        isinstance(turn, NativeItem) and turn.format == CHAT_FORMAT
    ):
        return turn
    if not isinstance(turn, NativeItem):
        return chat
    rest = {k: v for k, v in turn.item.items() if k != CHAT_ORIGINAL_KEY}
    return NativeItem(turn.format, {CHAT_ORIGINAL_KEY: chat.item, **rest}, turn.message)


def chat_original(turn: Turn) -> dict[str, Any] | None:
    """The chat message a stored `turn` goes to a chat upstream as, when it is not its view:
    the view with the upstream's own fields its item kept (`with_own_fields`)."""
    if turn.item is None:
        return None
    kept = turn.item if turn.format == CHAT_FORMAT else turn.item.get(CHAT_ORIGINAL_KEY)
    return with_own_fields(turn.to_message(), kept) if isinstance(kept, dict) else None


def with_own_fields(view: Mapping[str, Any], kept: Mapping[str, Any]) -> dict[str, Any] | None:
    """`view` with the fields of its upstream's own that the item `kept` holds, its calls'
    by their ids; None when it holds none. Only those: what OpenAI's answer has and its
    requests do not (``annotations``, a whole ``audio``) stays out, as the view leaves it."""
    given = kept.get("tool_calls")
    calls = {
        c.get("id"): own
        for c in (given if isinstance(given, list) else ())
        if isinstance(c, Mapping) and (own := call_fields(c))
    }
    fields = own_fields(kept)
    if not fields and not calls:
        return None
    sent = {**view, **fields}
    if calls:
        sent["tool_calls"] = [{**c, **calls.get(c["id"], {})} for c in view.get("tool_calls") or ()]
    return sent


def _said(value: object) -> bool:
    return value is not None and value != "" and value != [] and value != {}
