"""A Responses request's fields as a chat completion's, and a chat answer as Responses items.

    options = chat_options(tools=..., tool_choice=..., text=..., reasoning=...)
    items = output_items(answer_message, message_id="msg_...")

For a gateway in front of a chat-completions upstream (vLLM, llama.cpp's server, Ollama,
OpenAI's own chat endpoint): what the model is asked is translated here, the answer comes back
as the output items a Responses client reads (an ``output_text`` message, ``function_call``
items), and those items are what the thread stores. Pure conversions, no I/O.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from ..types import Message, NativeItem
from . import unserved_choice
from .client_tools import Offered, in_client_words
from .local_tools import APPLY_PATCH, SHELL
from .responses import turns_of
from .tool_choice import ALLOWED_TOOLS, responses_allowed

__all__ = [
    "answer_turn",
    "chat_options",
    "native_output",
    "new_id",
    "output_items",
    "reasoning_item",
]


def new_id(prefix: str) -> str:
    """An id in OpenAI's style (``resp_...``, ``msg_...``, ``fc_...``, ``conv_...``)."""
    return f"{prefix}_{uuid.uuid4().hex}"


def chat_options(
    *,
    tool_choice: object = None,
    text: Mapping[str, Any] | None = None,
    reasoning: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The chat request's fields for what a Responses request asks of the answer (a choice of
    the client's custom tool, ``shell`` or ``apply_patch``: of the function it is offered
    as)."""
    options: dict[str, Any] = {}
    if isinstance(tool_choice, str):
        options["tool_choice"] = tool_choice
    elif isinstance(tool_choice, Mapping) and tool_choice.get("type") == ALLOWED_TOOLS:
        options["tool_choice"] = responses_allowed(tool_choice)
    elif isinstance(tool_choice, Mapping) and tool_choice.get("type") in (SHELL, APPLY_PATCH):
        options["tool_choice"] = {"type": "function", "function": {"name": tool_choice["type"]}}
    elif isinstance(tool_choice, Mapping):
        if tool_choice.get("type") not in ("function", "custom"):
            raise unserved_choice(tool_choice.get("type"))
        options["tool_choice"] = {"type": "function", "function": {"name": tool_choice["name"]}}
    fmt = (text or {}).get("format")
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
        schema = {"name": fmt["name"], "schema": fmt.get("schema") or {}}
        for key in ("description", "strict"):
            if fmt.get(key) is not None:
                schema[key] = fmt[key]
        options["response_format"] = {"type": "json_schema", "json_schema": schema}
    elif isinstance(fmt, Mapping) and fmt.get("type") == "json_object":
        options["response_format"] = {"type": "json_object"}
    verbosity = (text or {}).get("verbosity")
    if verbosity is not None:
        options["verbosity"] = verbosity
    effort = (reasoning or {}).get("effort")
    if effort is not None:
        options["reasoning_effort"] = effort
    return options


def reasoning_item(item_id: str, text: str) -> dict[str, Any]:
    """A chat upstream's thinking (`formats.chat_answer.reasoning_of`) as a reasoning item,
    its text as ``reasoning_text`` content, as the Responses API gives an open model's."""
    return {
        "id": item_id,
        "type": "reasoning",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}],
    }


def output_items(
    answer: Message,
    *,
    message_id: str,
    offered: Mapping[str, Offered] | None = None,
    reasoning: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The answer (a chat assistant message) as output items: its `reasoning` item first when
    it has one (`reasoning_item`), its text as one completed ``message`` (when it has text, or
    calls nothing), then a ``function_call`` per call, a call of a tool chat has no word for
    (one of `offered`) in the client's words."""
    items: list[dict[str, Any]] = [reasoning] if reasoning is not None else []
    text = answer.get("content")
    calls = answer.get("tool_calls") or ()
    if text or not calls:
        items.append(
            {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [
                    {"type": "output_text", "text": text or "", "annotations": [], "logprobs": []}
                ],
            }
        )
    for call in calls:
        function = call["function"]
        item = {
            "id": new_id("fc"),
            "type": "function_call",
            "status": "completed",
            "call_id": call["id"],
            "name": function["name"],
            "arguments": function["arguments"],
        }
        items.append(in_client_words(item, offered or {}))
    return items


def answer_turn(
    answer: Message,
    *,
    message_id: str,
    offered: Mapping[str, Offered] | None = None,
    reasoning: dict[str, Any] | None = None,
) -> NativeItem:
    """The turn a thread stores for the answer: its output items verbatim (`output_items`),
    its view the answer (see `workingmem.formats.responses`)."""
    items = output_items(answer, message_id=message_id, offered=offered, reasoning=reasoning)
    (turn,) = turns_of(items)
    return turn


def native_output(
    completion: object,
    answer: Message,
    *,
    message_id: str,
    offered: Mapping[str, Offered] | None = None,
) -> NativeItem | None:
    """The turn to store for an answer of an upstream that speaks Responses: its ``output``
    as it came (reasoning items and their encrypted content included), but the calls the
    answer does not keep (the gateway's own, tools not offered), its calls of the tools chat
    has no word for (`offered`) in the client's words, and with `message_id` on its message
    (the id a stream showed). None when the completion is no Response."""
    raw = getattr(completion, "raw", None)
    if not isinstance(raw, Mapping) or raw.get("object") != "response":
        return None
    kept = {call["id"] for call in answer.get("tool_calls") or ()}
    items: list[dict[str, Any]] = []
    named = False
    for item in raw.get("output") or ():
        if item.get("type") == "function_call" and item.get("call_id") not in kept:
            continue
        if item.get("type") == "message" and not named:
            item, named = {**item, "id": message_id}, True
        items.append(in_client_words(dict(item), offered or {}))
    turns = turns_of(items) if items else []
    return turns[0] if len(turns) == 1 else None
