"""OpenAI Responses input items as chat turns, and back.

    turns = turns_of(items)                 # NativeItems: the items verbatim, their chat view
    await store.append(..., messages=turns)
    items = [item for turn in stored for item in items_of(turn)]   # the items, as given

One chat turn is what the chat format would make one message of: a user (or system,
developer) message item; an assistant's answer, which in the Responses API is a run of items
(reasoning, output messages, function calls and hosted tool calls of one response); or one call's
output. So a turn stores ``{"items": [...]}``: the run of items exactly as given. The view
carries the answer's text and its calls as ``tool_calls`` (client-side calls only: those whose
output comes back as an ``*_output`` item), so a call and its outputs form one unit.

The view leaves out what the chat format has no place for (reasoning, hosted tool calls such as
``web_search_call``): they travel in the items, not in the token count.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import ValidationError
from ..types import Message, NativeItem, Turn
from . import compact_json
from .breakpoints import BREAKPOINT
from .client_tools import (
    ADDITIONAL,
    INPUT,
    TOOL_SEARCH,
    custom_arguments,
    flat_name,
    search_arguments,
    search_result_text,
)
from .compaction import notes_of, text_of_notes
from .files import carries_files, chat_part_of_input_file, input_file_of_chat_part, text_or_parts
from .local_tools import LOCAL_CALLS, LOCAL_OUTPUTS, call_of, output_text

__all__ = [
    "FORMAT",
    "LOGPROBS",
    "OPEN_UNIT_READ",
    "instruction_text",
    "is_reference",
    "is_user_message",
    "items_of",
    "items_of_message",
    "open_calls",
    "starts_with_output",
    "turns_of",
]

FORMAT = "openai.responses"
LOGPROBS = "message.output_text.logprobs"
"""The ``include`` entry that asks for the answer's tokens with their log probabilities."""
_USER_ROLES = ("user", "system", "developer")
_USER_SIDE_TYPES = ("mcp_approval_response", "item_reference", ADDITIONAL)

OPEN_UNIT_READ = 130
"""How many of a thread's newest turns hold its newest unit, whatever it is: an assistant turn
of up to 128 calls and their results."""


def turns_of(
    items: Sequence[Mapping[str, Any]], *, open_calls: Iterable[str] = ()
) -> list[NativeItem]:
    """Groups items into chat turns, in order.

    `open_calls`: the calls of the thread's newest assistant turn that have no output yet, so
    that an output item at the start of `items` answers its call as a tool turn. An output of
    a call that is not open becomes a user turn (its item kept as given): a history the chat
    format could not express is stored, not refused.
    """
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
        raise ValidationError("items", "must be a list of Responses input items")
    turns: list[NativeItem] = []
    group: list[dict[str, Any]] = []
    calls = set(open_calls)

    def flush() -> None:
        if group:
            turns.append(_answer(list(group)))
            calls.clear()
            calls.update(_client_calls(group))
            group.clear()

    for index, raw in enumerate(items):
        if not isinstance(raw, Mapping):
            raise ValidationError(f"items[{index}]", "must be a Responses input item (a dict)")
        item = dict(raw)
        side = _side(item)
        if side == "assistant":
            group.append(item)
            continue
        flush()
        call_id = item.get("call_id")
        if side == "output" and call_id in calls:
            calls.discard(call_id)
            turns.append(NativeItem(FORMAT, {"items": [item]}, _tool_view(item)))
        else:
            calls.clear()  # a user turn ends the unit: no later output answers its calls
            turns.append(NativeItem(FORMAT, {"items": [item]}, _user_view(item)))
    flush()
    return turns


def open_calls(turns: Sequence[Turn]) -> frozenset[str]:
    """The calls of the newest assistant turn in `turns` (a thread's newest turns, oldest
    first) that no tool turn after it answers yet: what an output item at the start of the
    next items answers (`turns_of`'s `open_calls`)."""
    answered: set[str] = set()
    for turn in reversed(turns):
        if turn.role == "tool" and turn.tool_call_id is not None:
            answered.add(turn.tool_call_id)
        elif turn.role == "assistant" and turn.tool_calls:
            return frozenset(call.id for call in turn.tool_calls) - answered
        else:
            break
    return frozenset()


def starts_with_output(items: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the first item is a call's output (``function_call_output``, ...)."""
    kind = items[0].get("type") if items else None
    return isinstance(kind, str) and kind.endswith("_output")


def is_user_message(item: Mapping[str, Any]) -> bool:
    """A message of the user's (not the system's, nor an answer's; no other item): what a
    compaction keeps of a conversation."""
    return item.get("type", "message") == "message" and item.get("role") == "user"


def instruction_text(turn: NativeItem) -> str | None:
    """The text of a turn that is one system or developer message of text alone, else None."""
    items = turn.item.get("items") if turn.format == FORMAT else None
    if not isinstance(items, list) or len(items) != 1:
        return None
    item = items[0]
    if item.get("type", "message") != "message" or item.get("role") not in ("system", "developer"):
        return None
    content = turn.message.get("content")
    return content if isinstance(content, str) else None


def is_reference(item: Mapping[str, Any]) -> bool:
    """An ``item_reference``: its type says so, or, left out (OpenAI's types allow it), the
    item has no role, which a message would."""
    kind = item.get("type")
    return kind == "item_reference" or (kind is None and "role" not in item)


def items_of(turn: Turn) -> list[dict[str, Any]]:
    """The items a stored turn was made of; a turn written in another format (a chat
    message, say) as the items that say the same."""
    original = turn.in_format(FORMAT)
    if original is not None:
        return [dict(item) for item in original["items"]]
    return items_of_message(turn.to_message())


# -- items -> view ---------------------------------------------------------------------------


def _side(item: Mapping[str, Any]) -> str:
    kind = item.get("type")
    if kind in (None, "message"):
        return "assistant" if item.get("role") == "assistant" else "user"
    if not isinstance(kind, str):
        raise ValidationError("items.type", f"must be a string, got {kind!r}")
    if kind.endswith("_output"):
        return "output"
    if kind in _USER_SIDE_TYPES or notes_of(item) is not None:  # the gateway's compaction
        return "user"
    return "assistant"


def _client_calls(group: Sequence[Mapping[str, Any]]) -> list[str]:
    """The call ids of a response's client-side calls (those that get an output item)."""
    return [
        str(item["call_id"])
        for item in group
        if item.get("type") not in (None, "message") and isinstance(item.get("call_id"), str)
    ]


def _answer(group: list[dict[str, Any]]) -> NativeItem:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    seen: set[str] = set()
    for item in group:
        kind = item.get("type")
        if kind in (None, "message"):
            texts.append(_text(item.get("content")))
        elif isinstance(item.get("call_id"), str) and item["call_id"] not in seen:
            # a second item of one call (no response has them; a hand-made history may) is
            # kept verbatim in the turn, and its call once in the chat view
            seen.add(item["call_id"])
            calls.append(_call_view(item))
    view: Message = {"role": "assistant", "content": "\n".join(t for t in texts if t)}
    if calls:
        view = {"role": "assistant", "content": view["content"] or None, "tool_calls": calls}
    return NativeItem(FORMAT, {"items": group}, view)


def _call_view(item: Mapping[str, Any]) -> dict[str, Any]:
    if item.get("type") == "function_call":
        name, arguments = flat_name(item), item.get("arguments")
    elif item.get("type") == "custom_tool_call":  # as its tool is offered (`client_tools`)
        name, arguments = flat_name(item), custom_arguments(item.get(INPUT, ""))
    elif item.get("type") == "tool_search_call":
        name, arguments = TOOL_SEARCH, search_arguments(item)
    elif item.get("type") in LOCAL_CALLS:  # as its tool is offered (`local_tools`)
        name, arguments = call_of(item)
    else:  # computer calls and the like: their action is their arguments
        name = str(item.get("name") or item.get("type"))
        rest = {k: v for k, v in item.items() if k not in ("type", "id", "call_id", "status")}
        arguments = rest.get("input") if isinstance(rest.get("input"), str) else compact_json(rest)
    return {
        "id": item["call_id"],
        "type": "function",
        "function": {
            "name": str(name),
            "arguments": arguments if isinstance(arguments, str) else compact_json(arguments),
        },
    }


def _tool_view(item: Mapping[str, Any]) -> Message:
    """A call's output as a tool turn: its text, and the images and files a tool returned
    (``input_image``, ``input_file`` in a list output) as the chat parts that carry them; a
    ``tool_search_output`` as the tools it found (`search_result_text`)."""
    output = item.get("output")
    content: str | list[dict[str, Any]]
    if item.get("type") == "tool_search_output":
        content = search_result_text(item)
    elif item.get("type") in LOCAL_OUTPUTS:
        content = output_text(item)
    elif isinstance(output, str):
        content = output
    elif isinstance(output, list):
        content = text_or_parts(_chat_parts(output))
    else:
        content = compact_json(output)
    return {"role": "tool", "tool_call_id": item["call_id"], "content": content}


def _user_view(item: Mapping[str, Any]) -> Message:
    notes = notes_of(item)
    if notes is not None:
        return {"role": "user", "content": text_of_notes(notes)}
    if item.get("type") == ADDITIONAL:  # a developer's tools: offered, named here
        return {"role": "user", "content": search_result_text(item)}
    if item.get("type") not in (None, "message"):
        return {"role": "user", "content": compact_json(item)}
    content = item.get("content")
    if isinstance(content, str):
        return {"role": "user", "content": content}
    parts = _chat_parts(content if isinstance(content, list) else [])
    return {"role": "user", "content": text_or_parts(parts)}


def _chat_parts(content: list[Any]) -> list[dict[str, Any]]:
    """Input parts as the chat parts that say the same; an image by file id (chat takes an
    image by URL only) as a line that names it; parts without text or file left out."""
    parts: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "input_image" and isinstance(part.get("image_url"), str):
            parts.append({"type": "image_url", "image_url": {"url": part["image_url"]}})
        elif kind == "input_image":
            parts.append({"type": "text", "text": f"[image: {part.get('file_id') or 'attached'}]"})
        elif kind == "input_file":
            parts.append(chat_part_of_input_file(part))
        elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
    return parts


def _text(content: object) -> str:
    """The text of a message's content: a string, or its text and refusal parts joined."""
    if isinstance(content, str):
        return content
    texts = []
    for part in content if isinstance(content, list) else []:
        if isinstance(part, Mapping):
            text = part.get("text", part.get("refusal"))
            if isinstance(text, str):
                texts.append(text)
    return "\n".join(texts)


# -- view -> items ---------------------------------------------------------------------------


def _input_part(part: Mapping[str, Any]) -> dict[str, Any]:
    """A user's chat content part as a Responses input part, its image's detail and its
    cache mark (``prompt_cache_breakpoint``, the same on both APIs) kept."""
    kind = part.get("type")
    converted: dict[str, Any]
    if kind == "image_url":
        image = part["image_url"]
        detail = image.get("detail") or "auto"
        converted = {"type": "input_image", "image_url": image["url"], "detail": detail}
    elif kind in ("file", "input_audio"):
        converted = input_file_of_chat_part(part)
    else:
        converted = {"type": "input_text", "text": part.get("text", "")}
    mark = part.get(BREAKPOINT)
    if mark is not None:
        converted[BREAKPOINT] = mark
    return converted


def items_of_message(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A chat message as the Responses items that say the same."""
    role = message["role"]
    content = message.get("content")
    if role == "tool":
        output: str | list[dict[str, Any]] = _text(content)
        if isinstance(content, list) and carries_files(content):
            output = [_input_part(part) for part in content]  # the files a tool returned
        return [
            {"type": "function_call_output", "call_id": message["tool_call_id"], "output": output}
        ]
    if role == "user":
        if isinstance(content, list):
            parts = [_input_part(part) for part in content]
            return [{"role": "user", "content": parts}]
        return [{"role": "user", "content": content or ""}]
    items: list[dict[str, Any]] = []
    text = _text(content)
    if text or not message.get("tool_calls"):
        items.append({"role": "assistant", "content": text})
    for call in message.get("tool_calls") or ():
        function = call["function"]
        items.append(
            {
                "type": "function_call",
                "call_id": call["id"],
                "name": function["name"],
                "arguments": function["arguments"],
            }
        )
    return items
