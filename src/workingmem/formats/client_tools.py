"""The client's tools of the Responses API that chat has no word for, as chat functions, and
their calls back in the client's words. The gateway asks every upstream in chat's terms (an
upstream that speaks Responses gets them back as function tools), so:

- a ``namespace`` tool (function tools grouped under a name, as the Codex CLI sends its agents'
  tools): each function is offered as ``<namespace>__<name>``, the namespace's description
  before its own;
- a ``custom`` tool (free-form text input, maybe in a grammar, as Codex sends ``apply_patch``
  for GPT-5 models): a function of one string parameter, ``input``, its format in that
  parameter's description.

A call of such a function comes back as the client's item (a ``function_call`` naming its
``namespace``, a ``custom_tool_call`` with its ``input``), and such items, stored, are seen by
the upstream as the calls it was offered.

    tools, offered = offer(request_tools)     # the chat tools; chat name -> Offered
    item = in_client_words(call_item, offered)
    flat = as_offered(stored_item)            # a stored item in the upstream's words
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ValidationError
from . import unserved_tool

__all__ = [
    "INPUT",
    "SEPARATOR",
    "Offered",
    "as_offered",
    "flat_name",
    "in_client_words",
    "offer",
]

SEPARATOR = "__"
INPUT = "input"
"""The one parameter of a custom tool's function: its free-form input."""
_MAX_NAME = 64
"""The longest function name OpenAI's and Anthropic's APIs take."""
_SERVED = ("function", "custom")


@dataclass(frozen=True, slots=True)
class Offered:
    """A client tool as the client named it, behind the chat name it is offered by."""

    name: str
    namespace: str | None = None
    custom: bool = False


def _joined(namespace: str | None, name: str) -> str:
    return f"{namespace}{SEPARATOR}{name}" if namespace else name


def flat_name(item: Mapping[str, Any]) -> str:
    """The chat name of a call item: its name, joined to its namespace."""
    namespace = item.get("namespace")
    return _joined(str(namespace) if namespace else None, str(item.get("name")))


def _each(
    tools: Sequence[Mapping[str, Any]],
) -> list[tuple[str, int, Mapping[str, Any], Mapping[str, Any] | None]]:
    """Every tool the client runs, with where it is in the request (the field of its list,
    its index) and the namespace tool it is in."""
    found: list[tuple[str, int, Mapping[str, Any], Mapping[str, Any] | None]] = []
    for index, tool in enumerate(tools):
        if tool.get("type") != "namespace":
            found.append(("", index, tool, None))
            continue
        for inner, grouped in enumerate(tool.get("tools") or ()):
            found.append((f"tools[{index}].", inner, grouped, tool))
    return found


def offer(tools: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Offered]]:
    """A request's tools as chat function tools, and by their chat names those that chat has
    no word for (a namespace's, a custom tool), to read the calls back. A tool of a type no
    upstream is offered (a hosted tool), a name past 64 characters, or one two tools would
    share, is refused, named."""
    functions: list[dict[str, Any]] = []
    offered: dict[str, Offered] = {}
    taken: set[str] = set()
    for within, index, tool, group in _each(tools):
        kind = tool.get("type")
        if kind not in _SERVED:
            raise unserved_tool(index, kind, "function and custom", within=within)
        namespace = str(group["name"]) if group is not None else None
        name = _joined(namespace, str(tool["name"]))
        where = f"{within}tools[{index}].name"
        if len(name) > _MAX_NAME:
            raise ValidationError(
                where,
                f"{name!r}: a namespace's tool is offered to the model as "
                f"'<namespace>{SEPARATOR}<name>', at most {_MAX_NAME} characters",
            )
        if name in taken:
            raise ValidationError(where, f"{name!r} names two tools")
        taken.add(name)
        if namespace is not None or kind == "custom":
            offered[name] = Offered(str(tool["name"]), namespace, custom=kind == "custom")
        functions.append(_function(tool, name, group))
    return functions, offered


def _function(
    tool: Mapping[str, Any], name: str, group: Mapping[str, Any] | None
) -> dict[str, Any]:
    """One chat function tool: a namespace's description before the tool's own; a custom
    tool's one parameter, its input."""
    described = [group.get("description") if group else None, tool.get("description")]
    function: dict[str, Any] = {"name": name}
    if any(described):
        function["description"] = "\n\n".join(text for text in described if text)
    if tool.get("type") == "custom":
        function["parameters"] = _input_parameters(tool.get("format"))
    else:
        for key in ("parameters", "strict"):
            if tool.get(key) is not None:
                function[key] = tool[key]
    return {"type": "function", "function": function}


def _input_parameters(fmt: object) -> dict[str, Any]:
    """A custom tool's function parameters: its input, a string, in its format as said."""
    said = "The tool's input: free-form text, not JSON"
    if isinstance(fmt, Mapping) and fmt.get("type") == "grammar":
        said += f", in this {fmt.get('syntax', '')} grammar:\n{fmt.get('definition', '')}"
    return {
        "type": "object",
        "properties": {INPUT: {"type": "string", "description": said}},
        "required": [INPUT],
        "additionalProperties": False,
    }


def in_client_words(item: dict[str, Any], offered: Mapping[str, Offered]) -> dict[str, Any]:
    """An answer's item as the client offered the tool it calls: a call of a namespace's
    function names the namespace, a custom tool's call is a ``custom_tool_call`` with its
    input; any other item as it is."""
    found = offered.get(item.get("name", "")) if item.get("type") == "function_call" else None
    if found is None:
        return item
    out = {**item, "name": found.name}
    if found.namespace is not None:
        out["namespace"] = found.namespace
    if not found.custom:
        return out
    out.pop("arguments", None)
    out["type"], out[INPUT] = "custom_tool_call", _input_of(str(item.get("arguments", "")))
    if isinstance(item.get("id"), str):
        out["id"] = "ctc_" + item["id"].removeprefix("fc_")
    return out


def _input_of(arguments: str) -> str:
    """A custom tool's input from its function's arguments; arguments that are no such
    object (a model that wrote the input bare) are the input."""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return arguments
    found = parsed.get(INPUT) if isinstance(parsed, dict) else None
    return found if isinstance(found, str) else arguments


def as_offered(item: Mapping[str, Any]) -> dict[str, Any]:
    """A stored item as the upstream sees it when it was offered the tools as chat functions:
    a namespaced call under its joined name, a custom tool's call and output as a function's."""
    kind = item.get("type")
    if kind == "custom_tool_call":  # its id, of another prefix, is left out
        rest = {k: v for k, v in item.items() if k not in ("id", "namespace", INPUT)}
        arguments = json.dumps({INPUT: item.get(INPUT, "")}, ensure_ascii=False)
        return {**rest, "type": "function_call", "name": flat_name(item), "arguments": arguments}
    if kind == "custom_tool_call_output":
        rest = {k: v for k, v in item.items() if k != "id"}
        return {**rest, "type": "function_call_output"}
    if kind == "function_call" and item.get("namespace"):
        rest = {k: v for k, v in item.items() if k != "namespace"}
        return {**rest, "name": flat_name(item)}
    return dict(item)
