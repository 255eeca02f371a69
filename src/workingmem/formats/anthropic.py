"""Anthropic Messages as chat turns, and back.

    turns = turns_of(request["messages"])          # NativeItems: the blocks verbatim, a chat view
    await store.append(..., messages=turns)
    messages = messages_of(stored_turns)           # Anthropic messages again, as given

One Anthropic message may be several chat turns: a user message opens with the
``tool_result`` blocks that answer the calls before it (each a ``tool`` turn of the chat view,
so that a call and its results stay one unit), then what the user says (a ``user`` turn). An
assistant message is one turn whatever its blocks (``thinking`` with its signature,
``redacted_thinking``, text, ``tool_use``, server tools): its view carries the text and the
``tool_use`` blocks as ``tool_calls``. Each turn stores ``{"role", "content"}`` with exactly the
blocks it was made of (a text content stays a text), and `messages_of` joins consecutive turns
of one role into one message again, as Anthropic itself reads consecutive messages of a role.

The view leaves out what the chat format has no place for (thinking, server tool calls): they
travel in the blocks, not in the token count.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from ..errors import ValidationError
from ..types import Message, NativeItem, Turn
from . import compact_json, unserved_tool
from .anthropic_system import SYSTEM_ROLE
from .client_tools import found_tools_text
from .files import (
    carries_files,
    chat_part_of_document,
    document_of_chat_part,
    image_url_of,
    text_or_parts,
)

__all__ = [
    "ERROR_TYPES",
    "FORMAT",
    "answer_item",
    "answer_turn",
    "answer_view",
    "blocks_of",
    "chat_options",
    "chat_tools",
    "error_status",
    "error_type",
    "joined",
    "message_of",
    "messages_of",
    "stop_reason",
    "thinking_block",
    "turns_of",
]

FORMAT = "anthropic.messages"

ERROR_TYPES: Mapping[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
"""The type of Anthropic's error for each HTTP status its API documents."""
_ERROR_STATUS = {kind: status for status, kind in ERROR_TYPES.items()}


def error_type(status: int) -> str:
    """Anthropic's error type for `status`: the documented one, else ``api_error`` for a
    server error and ``invalid_request_error`` for any other."""
    return ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def error_status(kind: object) -> int | None:
    """The HTTP status an Anthropic error type stands for; None for a type it does not
    document (an error event's type in a stream that began 200 OK, for instance)."""
    return _ERROR_STATUS.get(str(kind))


def turns_of(messages: Sequence[Mapping[str, Any]]) -> list[NativeItem]:
    """The messages as chat turns, in order (see the module)."""
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise ValidationError("messages", "must be a list of Anthropic messages")
    turns: list[NativeItem] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ValidationError(f"messages[{index}]", "must be a message (a dict)")
        role = message.get("role")
        content = message.get("content")
        if role == "assistant":
            item = {"role": role, "content": content}
            turns.append(NativeItem(FORMAT, item, answer_view(content)))
        elif role == "user":
            turns += _user_turns(content)
        elif role != SYSTEM_ROLE:  # instructions for the call (`anthropic_system`), no turn
            raise ValidationError(
                f"messages[{index}].role", "must be 'user', 'assistant' or 'system'"
            )
    return turns


def messages_of(turns: Sequence[Turn]) -> list[dict[str, Any]]:
    """The turns as Anthropic messages: each as it was given (a turn written in another
    format as the blocks that say the same), consecutive turns of one role in one message."""
    return joined(_message(turn) for turn in turns)


def _message(turn: Turn) -> dict[str, Any]:
    original = turn.in_format(FORMAT)
    return dict(original) if original is not None else message_of(turn.to_message())


def joined(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive messages of one role as one message, their blocks in order: as Anthropic
    itself reads them, and as its strictest validators want them."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if out and out[-1]["role"] == message["role"]:
            out[-1]["content"] = blocks_of(out[-1]["content"]) + blocks_of(message["content"])
        else:
            out.append(dict(message))
    return out


def blocks_of(content: object) -> list[dict[str, Any]]:
    """A message's content as blocks (a text is one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [dict(block) for block in content or ()] if isinstance(content, list) else []


# -- blocks -> view ----------------------------------------------------------------------------


def _user_turns(content: object) -> list[NativeItem]:
    if isinstance(content, str):
        return [NativeItem(FORMAT, {"role": "user", "content": content}, _said(content))]
    blocks = _blocks(content, "user")
    turns: list[NativeItem] = []
    rest: list[dict[str, Any]] = []
    for block in blocks:
        if block.get("type") == "tool_result" and not rest:
            item = {"role": "user", "content": [block]}
            turns.append(NativeItem(FORMAT, item, _tool_view(block)))
        else:
            rest.append(block)
    if rest or not turns:
        turns.append(NativeItem(FORMAT, {"role": "user", "content": rest}, _user_view(rest)))
    return turns


def _blocks(content: object, role: str) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        raise ValidationError(f"{role}.content", "must be a text or a list of content blocks")
    blocks = []
    for block in content:
        if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
            raise ValidationError(f"{role}.content", "every block must be a dict with a type")
        blocks.append(dict(block))
    return blocks


def _said(text: str) -> Message:
    return {"role": "user", "content": text}


def _user_view(blocks: list[dict[str, Any]]) -> Message:
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if block["type"] == "tool_result":  # a result after the user's words: said, not a unit
            parts.append(_text_part(compact_json(block)))
        elif block["type"] in _VIEWED:
            parts.extend(_chat_parts(block))
    return {"role": "user", "content": text_or_parts(parts)}


_VIEWED = ("text", "image", "document")
"""The blocks a chat part says the same as; a user's other blocks have no place in the view."""


def _chat_parts(block: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A text, image or document block as the chat parts that say the same; an image by file
    id (nothing a chat model can open) as a line that names it."""
    kind = block.get("type")
    if kind == "text":
        return [_text_part(str(block.get("text", "")))]
    if kind == "document":
        return chat_part_of_document(block)
    url = image_url_of(block.get("source"))
    if url is not None:
        return [{"type": "image_url", "image_url": {"url": url}}]
    source = block.get("source")
    where = source.get("file_id") if isinstance(source, Mapping) else None
    return [_text_part(f"[image: {where or 'attached'}]")]


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _tool_view(block: Mapping[str, Any]) -> Message:
    """A ``tool_result`` block as a tool turn: its text, and the images and documents a tool
    returned (a screenshot, a PDF it read) as the chat parts that carry them; the deferred
    tools a tool search loaded (its ``tool_reference`` blocks, Claude Code's ToolSearch) by
    name; any other block named."""
    content = block.get("content")
    parts: list[dict[str, Any]] = []
    if isinstance(content, str):
        parts.append(_text_part(content))
    found: list[str] = []  # a tool search's result: the deferred tools it loads
    at = 0
    for inner in content if isinstance(content, list) else ():
        if not isinstance(inner, Mapping):
            continue
        if inner.get("type") == "tool_reference":
            at = at if found else len(parts)
            found.append(str(inner.get("tool_name")))
        elif inner.get("type") in _VIEWED:
            parts.extend(_chat_parts(inner))
        else:
            parts.append(_text_part(f"[{inner.get('type')}]"))
    if found:  # said once, where the first was
        parts.insert(at, _text_part(found_tools_text(found)))
    said = text_or_parts(parts)
    if block.get("is_error"):
        error = "Error:"
        said = f"{error} {said}" if isinstance(said, str) else [_text_part(error), *said]
    return {"role": "tool", "tool_call_id": str(block.get("tool_use_id", "")), "content": said}


def answer_view(content: object) -> Message:
    """An assistant message's chat view: its text, its ``tool_use`` blocks as tool calls."""
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in _blocks(content, "assistant"):
        if block["type"] == "text":
            texts.append(str(block.get("text", "")))
        elif block["type"] == "compaction" and isinstance(block.get("content"), str):
            # Claude's summary of the context before it (context management's compaction):
            # what a model of another API, and the summary update, must read in its place
            texts.append(block["content"])
        elif block["type"] == "tool_use":
            calls.append(
                {
                    "id": str(block.get("id", "")),
                    "type": "function",
                    "function": {
                        "name": str(block.get("name", "")),
                        "arguments": compact_json(block.get("input", {})),
                    },
                }
            )
    text = "\n".join(t for t in texts if t)
    if calls:
        return {"role": "assistant", "content": text or None, "tool_calls": calls}
    return {"role": "assistant", "content": text}


# -- view -> blocks ----------------------------------------------------------------------------


def message_of(message: Mapping[str, Any]) -> dict[str, Any]:
    """A chat message as the Anthropic message that says the same (a tool result is a user
    message with its ``tool_result`` block; tool calls are ``tool_use`` blocks)."""
    role = message["role"]
    content = message.get("content")
    if role == "tool":
        result: str | list[dict[str, Any]] = (
            content if isinstance(content, str) else _parts_text(content)
        )
        if isinstance(content, list) and carries_files(content):  # it returned files
            result = [_block_of(part) for part in content if part.get("text") != ""]
        block = {"type": "tool_result", "tool_use_id": message["tool_call_id"], "content": result}
        return {"role": "user", "content": [block]}
    if role == "user":
        if isinstance(content, list):
            return {"role": "user", "content": [_block_of(part) for part in content]}
        return {"role": "user", "content": content or ""}
    blocks: list[dict[str, Any]] = []
    text = content if isinstance(content, str) else _parts_text(content)
    if text:
        blocks.append({"type": "text", "text": text})
    for call in message.get("tool_calls") or ():
        function = call["function"]
        try:
            arguments = json.loads(function["arguments"] or "{}")
        except ValueError:
            arguments = {"arguments": function["arguments"]}
        blocks.append(
            {"type": "tool_use", "id": call["id"], "name": function["name"], "input": arguments}
        )
    return {"role": "assistant", "content": blocks or [{"type": "text", "text": ""}]}


def _block_of(part: Mapping[str, Any]) -> dict[str, Any]:
    if part.get("type") in ("file", "input_audio"):
        return document_of_chat_part(part)
    if part.get("type") == "image_url":
        url = str(part["image_url"]["url"])
        if url.startswith("data:") and ";base64," in url:
            media, data = url[5:].split(";base64,", 1)
            return {
                "type": "image",
                "source": {"type": "base64", "media_type": media, "data": data},
            }
        return {"type": "image", "source": {"type": "url", "url": url}}
    return {"type": "text", "text": str(part.get("text", ""))}


def _parts_text(content: object) -> str:
    return (
        "\n".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
        if isinstance(content, list)
        else ""
    )


# -- a chat upstream ---------------------------------------------------------------------------


def answer_turn(answer: Message, *, thinking: str = "") -> NativeItem:
    """The turn a thread stores for an answer a chat upstream gave: its blocks (its
    `thinking` first, when shown: `thinking_block`), its view."""
    item = message_of(answer)
    if thinking:
        item["content"] = [thinking_block(thinking), *item["content"]]
    return NativeItem(FORMAT, item, answer_view(item["content"]))


def thinking_block(text: str) -> dict[str, Any]:
    """A chat upstream's thinking (`formats.chat_answer.reasoning_of`) as a thinking block. Its
    signature is empty: only Anthropic signs its own, and this one goes back to the chat
    upstream as the field it came in (`CHAT_ORIGINAL_KEY`), not as the block."""
    return {"type": "thinking", "thinking": text, "signature": ""}


def answer_item(message: object, *, calls: Collection[str], text: bool = True) -> NativeItem | None:
    """The turn a thread stores for an answer an Anthropic upstream gave (its Message's JSON):
    the blocks verbatim (thinking and its signature), of its ``tool_use`` blocks only those of
    `calls`, its text blocks only when `text`. None when `message` is no Message."""
    if not isinstance(message, Mapping) or message.get("type") != "message":
        return None
    blocks = [
        dict(block)
        for block in message.get("content") or ()
        if isinstance(block, Mapping)
        and (block.get("type") != "tool_use" or block.get("id") in calls)
        and (text or block.get("type") != "text")
    ]
    return NativeItem(FORMAT, {"role": "assistant", "content": blocks}, answer_view(blocks))


def stop_reason(finish_reason: str | None, *, calls: bool) -> str:
    """A chat finish reason as Anthropic's ``stop_reason``."""
    if calls:
        return "tool_use"
    return {"length": "max_tokens", "stop": "end_turn"}.get(finish_reason or "stop", "end_turn")


def chat_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic's client tools as chat function tools. A server tool (``web_search_...``,
    ``code_execution_...``) is Anthropic's own, which a chat upstream has none of: refused,
    named."""
    out = []
    for index, tool in enumerate(tools):
        if tool.get("type") not in (None, "custom"):
            raise unserved_tool(index, tool.get("type"), "custom")
        function: dict[str, Any] = {"name": tool["name"], "parameters": tool["input_schema"]}
        if tool.get("description"):
            function["description"] = tool["description"]
        out.append({"type": "function", "function": function})
    return out


def chat_options(
    *,
    tool_choice: Mapping[str, Any] | None,
    stop_sequences: Sequence[str] | None,
    temperature: float | None,
    top_p: float | None,
    top_k: int | None,
    output_config: object = None,
) -> dict[str, Any]:
    """The chat request's fields for what an Anthropic request asks of the answer: its tool
    choice, stop sequences and sampling, and its structured output (``output_config.format``,
    what the SDK's ``messages.parse`` sends) as a ``json_schema`` response format."""
    options: dict[str, Any] = {}
    output = output_config.get("format") if isinstance(output_config, Mapping) else None
    if isinstance(output, Mapping) and output.get("type") == "json_schema":
        schema = output.get("schema")
        if not isinstance(schema, Mapping):
            raise ValidationError("output_config.format.schema", "a JSON schema (an object)")
        spec = {"name": "output", "schema": dict(schema)}
        options["response_format"] = {"type": "json_schema", "json_schema": spec}
    if tool_choice is not None:
        kind = tool_choice.get("type")
        if kind == "tool" and not tool_choice.get("name"):
            raise ValidationError("tool_choice.name", "a tool choice of type 'tool' names it")
        if kind == "tool":
            options["tool_choice"] = {"type": "function", "function": {"name": tool_choice["name"]}}
        else:
            options["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}[str(kind)]
        if tool_choice.get("disable_parallel_tool_use"):
            options["parallel_tool_calls"] = False
    if stop_sequences:
        options["stop"] = list(stop_sequences)[:4]
    for name, value in (("temperature", temperature), ("top_p", top_p), ("top_k", top_k)):
        if value is not None:
            options[name] = value
    return options
