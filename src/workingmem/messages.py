"""Messages in, turns out: validation, the canonical form, and the units of tool calls.

    clean = normalize_messages([{"role": "user", "content": "hi"}])
    planned = plan_units(previous=None, messages=clean, first_seq=1)

Every message a thread stores passes through here first, so a store never sees a malformed
one. A *unit* is a user turn, or an assistant turn with all the tool turns that answer its
calls; windows are cut between units, which is what keeps them provider-valid.

Limits (documented, each checked with the field and the limit in the error):

- ids (tenant, thread, user, tool call): 1 to 256 printable characters;
- one message: at most 1 MiB once serialized as JSON (UTF-8);
- one append: at most 1,000 messages.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from .errors import ValidationError
from .types import Message, Role, Turn

__all__ = [
    "MAX_ID_CHARS",
    "MAX_MESSAGES_PER_APPEND",
    "MAX_MESSAGE_BYTES",
    "OpenUnit",
    "PlannedTurn",
    "check_id",
    "dumps_message",
    "normalize_messages",
    "plan_units",
]

MAX_ID_CHARS = 256
MAX_MESSAGE_BYTES = 1 << 20
MAX_MESSAGES_PER_APPEND = 1_000

_ROLES: frozenset[str] = frozenset({"user", "assistant", "tool"})
_KEYS: dict[str, frozenset[str]] = {
    "user": frozenset({"role", "content", "name"}),
    "assistant": frozenset({"role", "content", "name", "tool_calls"}),
    "tool": frozenset({"role", "content", "tool_call_id"}),
}


def check_id(field_name: str, value: object) -> str:
    """Returns `value` when it is a usable id, else raises ValidationError naming the field."""
    if not isinstance(value, str):
        raise ValidationError(field_name, f"must be a string, got {type(value).__name__}")
    if not value:
        raise ValidationError(field_name, "must not be empty")
    if len(value) > MAX_ID_CHARS:
        raise ValidationError(
            field_name, f"is {len(value)} characters long; the limit is {MAX_ID_CHARS}"
        )
    if not value.isprintable():
        raise ValidationError(field_name, "must not contain control characters")
    return value


def dumps_message(message: Message) -> str:
    """The one serializer every store uses for a message."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


def normalize_messages(messages: object, field_name: str = "messages") -> list[Message]:
    """Validates chat-format messages (or `Turn`s) and returns their canonical dicts.

    Keys that are not part of a role's message are rejected, except those whose value is
    null or empty (SDK dumps carry ``"refusal": None``, ``"annotations": []``), which are
    dropped. Raises ValidationError with the path of the first bad value.
    """
    if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence):
        raise ValidationError(field_name, "must be a list of messages")
    if len(messages) > MAX_MESSAGES_PER_APPEND:
        raise ValidationError(
            field_name,
            f"has {len(messages)} messages; at most {MAX_MESSAGES_PER_APPEND} per append",
        )
    return [_normalize_one(item, f"{field_name}[{i}]") for i, item in enumerate(messages)]


def _normalize_one(item: object, path: str) -> Message:
    if isinstance(item, Turn):
        item = item.to_message()
    if not isinstance(item, dict):
        raise ValidationError(path, f"must be a message dict, got {type(item).__name__}")
    raw = cast(dict[str, Any], item)
    role = raw.get("role")
    if role not in _ROLES:
        raise ValidationError(f"{path}.role", f"must be user, assistant or tool, got {role!r}")
    allowed = _KEYS[role]
    for key, value in raw.items():
        if key not in allowed and value not in (None, "", [], {}):
            raise ValidationError(f"{path}.{key}", f"is not a field of a {role} message")

    message: Message = {"role": role}
    content = raw.get("content")
    tool_calls = raw.get("tool_calls") or None
    if role == "assistant":
        if tool_calls is not None:
            message["tool_calls"] = _normalize_tool_calls(tool_calls, f"{path}.tool_calls")
        elif content is None:
            raise ValidationError(
                f"{path}.content", "an assistant turn needs content or tool_calls"
            )
    elif content is None:
        raise ValidationError(f"{path}.content", f"a {role} turn needs content")
    message["content"] = (
        None if content is None else _normalize_content(content, f"{path}.content", role)
    )
    if role == "tool":
        message["tool_call_id"] = check_id(f"{path}.tool_call_id", raw.get("tool_call_id"))
    name = raw.get("name")
    if name is not None and role != "tool":
        message["name"] = check_id(f"{path}.name", name)

    size = _serialized_size(message, path)
    if size > MAX_MESSAGE_BYTES:
        raise ValidationError(
            path, f"is {size} bytes once serialized; the limit is {MAX_MESSAGE_BYTES}"
        )
    return message


def _normalize_content(content: object, path: str, role: Role) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ValidationError(
            path, f"must be a string or a list of parts, got {type(content).__name__}"
        )
    if not content:
        raise ValidationError(path, "must not be an empty list of parts")
    parts: list[dict[str, Any]] = []
    for i, part in enumerate(content):
        part_path = f"{path}[{i}]"
        if not isinstance(part, dict):
            raise ValidationError(part_path, f"must be a part dict, got {type(part).__name__}")
        kind = part.get("type")
        if not isinstance(kind, str) or not kind:
            raise ValidationError(f"{part_path}.type", "must be a non-empty string")
        if kind == "text":
            if not isinstance(part.get("text"), str):
                raise ValidationError(f"{part_path}.text", "a text part needs a string text")
        elif role == "tool":
            raise ValidationError(
                f"{part_path}.type", f"a tool result takes text parts, got {kind!r}"
            )
        elif kind == "image_url":
            image = part.get("image_url")
            if not isinstance(image, dict) or not isinstance(image.get("url"), str):
                raise ValidationError(f"{part_path}.image_url.url", "must be a string")
        parts.append(dict(part))
    return parts


def _normalize_tool_calls(tool_calls: object, path: str) -> list[dict[str, Any]]:
    if not isinstance(tool_calls, list):
        raise ValidationError(path, f"must be a list, got {type(tool_calls).__name__}")
    calls: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, call in enumerate(tool_calls):
        call_path = f"{path}[{i}]"
        if not isinstance(call, dict):
            raise ValidationError(call_path, f"must be a tool call dict, got {type(call).__name__}")
        call_id = check_id(f"{call_path}.id", call.get("id"))
        if call_id in seen:
            raise ValidationError(f"{call_path}.id", f"{call_id!r} is used twice in one turn")
        seen.add(call_id)
        kind = call.get("type", "function")
        if kind != "function":
            raise ValidationError(f"{call_path}.type", f"must be 'function', got {kind!r}")
        function = call.get("function")
        if not isinstance(function, dict):
            raise ValidationError(
                f"{call_path}.function", "must be an object with name and arguments"
            )
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise ValidationError(f"{call_path}.function.name", "must be a non-empty string")
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            raise ValidationError(
                f"{call_path}.function.arguments",
                "must be a string (the JSON text the model wrote)",
            )
        calls.append(
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        )
    return calls


def _serialized_size(message: Message, path: str) -> int:
    try:
        return len(dumps_message(message).encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ValidationError(
            path, "contains text that is not valid Unicode (a lone surrogate)"
        ) from exc


@dataclass(slots=True)
class OpenUnit:
    """The newest unit of a thread, as far as the next append needs it."""

    start_seq: int
    """The seq of the unit's first turn."""
    calls: frozenset[str] = frozenset()
    """The call ids of the unit's assistant turn; empty for a user turn."""
    answered: set[str] = field(default_factory=set)
    """The calls that already have a tool turn."""

    @classmethod
    def from_turns(cls, messages: Sequence[Message], start_seq: int) -> OpenUnit | None:
        """Rebuilds the newest unit from its stored messages (oldest first)."""
        if not messages:
            return None
        head = messages[0]
        calls = frozenset(call["id"] for call in head.get("tool_calls") or ())
        answered = {m["tool_call_id"] for m in messages[1:] if m["role"] == "tool"}
        return cls(start_seq=start_seq, calls=calls, answered=answered)


@dataclass(frozen=True, slots=True)
class PlannedTurn:
    """A validated message with its place in the thread."""

    seq: int
    unit_seq: int
    message: Message


def plan_units(
    previous: OpenUnit | None,
    messages: Sequence[Message],
    first_seq: int,
    field_name: str = "messages",
) -> list[PlannedTurn]:
    """Gives each message its seq and unit; rejects a tool result that answers no open call.

    A tool turn must follow the assistant turn whose call it answers (with only other results
    of that turn in between), and answer each call once: that is what every provider requires
    of a request, so a thread that breaks it could never be sent whole.
    """
    unit = previous
    planned: list[PlannedTurn] = []
    for offset, message in enumerate(messages):
        seq = first_seq + offset
        if message["role"] == "tool":
            call_id = message["tool_call_id"]
            if unit is None or call_id not in unit.calls:
                raise ValidationError(
                    f"{field_name}[{offset}].tool_call_id",
                    f"{call_id!r} matches no call of the assistant turn it follows",
                )
            if call_id in unit.answered:
                raise ValidationError(
                    f"{field_name}[{offset}].tool_call_id", f"call {call_id!r} already has a result"
                )
            unit.answered.add(call_id)
        else:
            calls = frozenset(call["id"] for call in message.get("tool_calls") or ())
            unit = OpenUnit(start_seq=seq, calls=calls)
        planned.append(PlannedTurn(seq=seq, unit_seq=unit.start_seq, message=message))
    return planned
