"""A Chat Completions client's ``custom`` tools (free-form text input, maybe in a grammar, as
GPT-5 models take them) as every upstream is offered them: the function of one string
parameter, ``input``, that a Responses client's custom tools are offered as
(`client_tools`); and their calls back in the client's words.

    functions, custom = offered_functions(tools)     # chat tools; the custom tools' names
    message = with_function_calls(message)           # a resent assistant turn, as stored
    calls = in_client_words(calls, custom)           # an answer's calls, as the client sees them

The thread stores a custom call as the function call it was offered as (what every upstream
reads back in the window); the client sees, and resends, ``{"type": "custom", "custom":
{"name", "input"}}``, which the overlap rule reads as that same function call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ValidationError
from ..types import Message
from .client_tools import custom_arguments, custom_function, custom_input
from .tool_choice import allowed_names, chat_allowed

__all__ = [
    "function_choice",
    "in_client_words",
    "offered_functions",
    "with_function_calls",
]

CUSTOM = "custom"


def offered_functions(
    tools: Sequence[Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], frozenset[str]]:
    """The request's tools as chat function tools (a custom tool as its function), and the
    names of its custom tools. A custom tool named like another tool is refused, named: the
    upstream would be offered two functions of that name."""
    functions: list[dict[str, Any]] = []
    custom: set[str] = set()
    for tool in tools:
        if tool.get("type") != CUSTOM:
            functions.append(dict(tool))
            continue
        spec = tool.get(CUSTOM) or {}
        name = str(spec.get("name"))
        functions.append(custom_function(name, spec.get("description"), spec.get("format")))
        custom.add(name)
    names = [str((tool.get("function") or {}).get("name")) for tool in functions]
    for index, (tool, name) in enumerate(zip(tools, names, strict=True)):
        if tool.get("type") == CUSTOM and names.count(name) > 1:
            raise ValidationError(f"tools[{index}].custom.name", f"{name!r} names two tools")
    return functions, frozenset(custom)


def function_choice(choice: object) -> object:
    """A ``tool_choice`` as the functions are offered: a custom tool named (alone, or among
    ``allowed_tools``) as its function; any other choice as it is."""
    if isinstance(choice, Mapping) and choice.get("type") == CUSTOM:
        return {"type": "function", "function": {"name": (choice.get(CUSTOM) or {}).get("name")}}
    found = allowed_names(choice)
    if found is None:
        return choice
    return chat_allowed(*found)


def with_function_calls(message: Message) -> Message:
    """An assistant message with its custom tools' calls as the function calls they were
    offered as; `message` itself when it has none."""
    calls = message.get("tool_calls") or ()
    if not any(call.get("type") == CUSTOM for call in calls):
        return message
    return {**message, "tool_calls": [_as_function(call) for call in calls]}


def _as_function(call: Mapping[str, Any]) -> dict[str, Any]:
    if call.get("type") != CUSTOM:
        return dict(call)
    spec = call.get(CUSTOM) or {}
    arguments = custom_arguments(spec.get("input"))
    said = {k: v for k, v in call.items() if k not in ("type", CUSTOM)}
    return {
        **said,
        "type": "function",
        "function": {"name": spec.get("name"), "arguments": arguments},
    }


def in_client_words(
    calls: Sequence[Mapping[str, Any]], custom: frozenset[str]
) -> list[dict[str, Any]]:
    """An answer's calls as the client offered their tools: a call of a custom tool's function
    is ``{"id", "type": "custom", "custom": {"name", "input"}}``."""
    out: list[dict[str, Any]] = []
    for call in calls:
        function = call.get("function") or {}
        if call.get("type", "function") != "function" or function.get("name") not in custom:
            out.append(dict(call))
            continue
        rest = {k: v for k, v in call.items() if k not in ("type", "function")}
        given = custom_input(str(function.get("arguments", "")))
        out.append({**rest, "type": CUSTOM, CUSTOM: {"name": function["name"], "input": given}})
    return out
