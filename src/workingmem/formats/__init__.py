"""Other APIs' conversation formats and their chat views: pure conversions, no I/O.

A turn stored from another format keeps its original (`NativeItem.item`) beside an OpenAI
chat-format view that token counts, units and windows use; these modules make the view and
give the originals back.
"""

import json
from collections.abc import Mapping
from typing import Any

from ..errors import ValidationError

__all__ = [
    "ORIGINAL_KEY",
    "carrying",
    "compact_json",
    "joined_instructions",
    "parsed_arguments",
    "unserved_choice",
    "unserved_tool",
]

ORIGINAL_KEY = "workingmem_original"
"""A window's message sent to an upstream that speaks a turn's own format (the Responses API,
Anthropic's Messages) carries that turn as stored under this key (`Turn.in_format`: a
reasoning item's ``encrypted_content``, a thinking block's ``signature``), so that the client
sends it instead of what the chat view would make. Only such a client sees it."""


def carrying(message: Mapping[str, Any], original: Mapping[str, Any] | None) -> dict[str, Any]:
    """`message` (a chat view) carrying its `original` under `ORIGINAL_KEY`; as it is when
    there is none."""
    return {**message, ORIGINAL_KEY: original} if original else dict(message)


def compact_json(value: object) -> str:
    """`value` as the compact JSON a view or a call's arguments are written in (what is no
    JSON, as its text)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def parsed_arguments(arguments: str) -> object:
    """A call's arguments as the object they are; as the model wrote them when no JSON."""
    try:
        parsed: object = json.loads(arguments)
    except ValueError:
        return arguments
    return parsed


def joined_instructions(*texts: str | None) -> str | None:
    """A call's system prompt from the instructions a request gives in several places (its
    ``system`` or ``instructions``, its system messages), in order, the empty ones left out;
    None when none says anything (the profile's prompt holds)."""
    given = [text for text in texts if text]
    return "\n\n".join(given) if given else None


def unserved_tool(index: int, kind: object, served: str, within: str = "") -> ValidationError:
    """The error for the tool `index` of a request's tools (or of those of its field
    `within`) of a type the gateway does not serve: a tool its upstream would run (the
    gateway offers the model only the client's tools, of type `served`, and its own)."""
    return ValidationError(
        f"{within}tools[{index}].type",
        f"{kind!r} tools are not served: only {served} tools are (the client runs them)",
    )


def unserved_choice(kind: object) -> ValidationError:
    """The error for a tool choice of a type the gateway does not serve (a hosted tool's, an
    MCP server's)."""
    return ValidationError(
        "tool_choice.type",
        f"{kind!r} tool choices are not served: only 'none', 'auto', 'required', "
        "'allowed_tools', a function tool or a custom tool",
    )
