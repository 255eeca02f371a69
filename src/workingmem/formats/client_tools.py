"""The client's tools of the Responses API that chat has no word for, as chat functions, and
their calls back in the client's words. The gateway asks every upstream in chat's terms (an
upstream that speaks Responses gets them back as function tools), so:

- a ``namespace`` tool (function tools grouped under a name, as the Codex CLI sends its agents'
  tools): each function is offered as ``<namespace>__<name>``, the namespace's description
  before its own;
- a ``custom`` tool (free-form text input, maybe in a grammar, as Codex sends ``apply_patch``
  for GPT-5 models): a function of one string parameter, ``input``, its format in that
  parameter's description;
- a ``tool_search`` the client runs (``execution: "client"``, as Codex sends it for the models
  it knows): a function ``tool_search`` of its parameters. The client answers a call with a
  ``tool_search_output`` whose ``tools`` the model may call from then on: the tools such outputs
  of the request loaded (`Loaded`) are offered after the request's own, and so are those of
  its ``additional_tools`` items (a developer's tools, added mid-conversation);
- a ``tool_search`` the server runs (the API's default): the gateway runs it
  (`formats.tool_search`); the tools it defers (``defer_loading``) are offered once loaded;
- a ``shell`` or an ``apply_patch`` the client runs on its machine (`formats.local_tools`):
  a function of that name whose parameters are what its call carries.

A call of such a function comes back as the client's item (a ``function_call`` naming its
``namespace``, a ``custom_tool_call`` with its ``input``, a ``tool_search_call`` with its
``arguments``), and such items, stored, are seen by the upstream as the calls it was offered.

    tools, offered = offer(request_tools, loaded=searches)   # chat tools; chat name -> Offered
    item = in_client_words(call_item, offered)
    flat = as_offered(stored_item)            # a stored item in the upstream's words
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ValidationError
from . import compact_json, parsed_arguments, unserved_tool
from .local_tools import (
    APPLY_PATCH,
    LOCAL_CALLS,
    LOCAL_OUTPUTS,
    SHELL,
    call_of,
    local_call,
    local_function,
    output_text,
)
from .tool_search import DEFERRED, Catalog, is_server_search

__all__ = [
    "ADDITIONAL",
    "INPUT",
    "SEPARATOR",
    "TOOL_SEARCH",
    "Loaded",
    "Offered",
    "as_offered",
    "custom_arguments",
    "custom_function",
    "custom_input",
    "flat_name",
    "found_tools_text",
    "in_client_words",
    "offer",
    "search_arguments",
    "search_result_text",
]

SEPARATOR = "__"
INPUT = "input"
"""The one parameter of a custom tool's function: its free-form input."""
_MAX_NAME = 64
"""The longest function name OpenAI's and Anthropic's APIs take."""
ADDITIONAL = "additional_tools"
"""An input item of a developer's tools, made available from there on (as a search's)."""
TOOL_SEARCH = "tool_search"
"""The function a client's ``tool_search`` is offered as (the name its description uses)."""
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_SERVED = ("function", "custom")
_SEARCH_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": "What the tools should do."}},
    "required": ["query"],
}
"""A client's ``tool_search`` without its own parameters: a query."""


@dataclass(frozen=True, slots=True)
class Offered:
    """A client tool as the client named it, behind the chat name it is offered by."""

    name: str
    namespace: str | None = None
    custom: bool = False
    search: bool = False
    """A ``tool_search``: a call of it is a ``tool_search_call``."""
    server: bool = False
    """The search is the server's (the gateway runs it)."""
    local: bool = False
    """A ``shell`` or ``apply_patch``: a call of it is a ``shell_call`` or an
    ``apply_patch_call``."""


@dataclass(frozen=True, slots=True)
class Loaded:
    """The tools one ``tool_search_output`` (or ``additional_tools``) item of a request loads,
    and where it is (``input[3].``, which the errors about them name)."""

    where: str
    tools: object


def _joined(namespace: str | None, name: str) -> str:
    return f"{namespace}{SEPARATOR}{name}" if namespace else name


def flat_name(item: Mapping[str, Any]) -> str:
    """The chat name of a call item: its name, joined to its namespace."""
    namespace = item.get("namespace")
    return _joined(str(namespace) if namespace else None, str(item.get("name")))


def _each(
    tools: object, where: str = ""
) -> list[tuple[str, int, Mapping[str, Any], Mapping[str, Any] | None]]:
    """Every tool the client runs, with where it is (the field of its list, `where` first,
    and its index) and the namespace tool it is in. A list that is no list of tools (a
    ``tool_search_output``'s, which no schema checked) is refused, named."""
    found: list[tuple[str, int, Mapping[str, Any], Mapping[str, Any] | None]] = []
    for index, tool in enumerate(_listed(tools, f"{where}tools")):
        if tool.get("type") != "namespace":
            found.append((where, index, tool, None))
            continue
        within = f"{where}tools[{index}]."
        for inner, grouped in enumerate(_listed(tool.get("tools"), f"{within}tools")):
            found.append((within, inner, grouped, tool))
    return found


def _listed(tools: object, where: str) -> list[Mapping[str, Any]]:
    if not isinstance(tools, list) or not all(isinstance(tool, Mapping) for tool in tools):
        raise ValidationError(where, "must be a list of tools (objects)")
    return tools


def offer(
    tools: Sequence[Mapping[str, Any]], *, loaded: Sequence[Loaded] = ()
) -> tuple[list[dict[str, Any]], dict[str, Offered]]:
    """A request's tools as chat function tools, then those its input's items `loaded` (each
    once: a tool loaded again, or one the request offers itself, is offered as first given);
    and by their chat names those that chat has no word for (a namespace's, a custom tool,
    the client's ``tool_search``), to read the calls back. A tool of a type no upstream is
    offered (a hosted tool), a name past 64 characters, or one two of the request's tools
    would share, is refused, named. Behind a search the server runs, the deferred tools are
    checked so too, and offered once an item loads them."""
    functions: list[dict[str, Any]] = []
    offered: dict[str, Offered] = {}
    named: set[str] = set()
    """The names of the request's own tools, deferred or not."""
    given: set[str] = set()
    """The names offered."""
    served = any(is_server_search(tool) for tool in tools)
    for within, index, tool, group in _each(list(tools)):
        if tool.get("type") == TOOL_SEARCH and not within:
            name, function, found = _search(tool, index, tools)
            where = f"tools[{index}]"
        elif tool.get("type") in (SHELL, APPLY_PATCH) and not within:
            name, function = str(tool["type"]), local_function(tool, index)
            found, where = Offered(name, local=True), f"tools[{index}]"
        else:
            name, function, found = _client_tool(within, index, tool, group)
            where = f"{within}tools[{index}].name"
        if name in named:
            raise ValidationError(where, f"{name!r} names two tools")
        named.add(name)
        if served and tool.get(DEFERRED) is True:
            continue  # offered once a search loads it
        given.add(name)
        functions.append(function)
        if found is not None:
            offered[name] = found
    for search in loaded:
        for within, index, tool, group in _each(search.tools, search.where):
            name, function, found = _client_tool(within, index, tool, group)
            if name in given:
                continue
            given.add(name)
            functions.append(function)
            if found is not None:
                offered[name] = found
    return functions, offered


def _client_tool(
    within: str, index: int, tool: Mapping[str, Any], group: Mapping[str, Any] | None
) -> tuple[str, dict[str, Any], Offered | None]:
    """A function or custom tool (maybe a namespace's): its chat name, its function, and how
    to read its calls back when chat has no word for it."""
    kind = tool.get("type")
    if kind not in _SERVED:
        raise unserved_tool(index, kind, "function and custom", within=within)
    where = f"{within}tools[{index}].name"
    namespace = _name_of(group, within.removesuffix(".") + ".name") if group else None
    name = _joined(namespace, _name_of(tool, where))
    if len(name) > _MAX_NAME:
        raise ValidationError(
            where,
            f"{name!r}: a namespace's tool is offered to the model as "
            f"'<namespace>{SEPARATOR}<name>', at most {_MAX_NAME} characters",
        )
    found = None
    if namespace is not None or kind == "custom":
        found = Offered(str(tool["name"]), namespace, custom=kind == "custom")
    return name, _function(tool, name, group), found


def _name_of(tool: Mapping[str, Any], where: str) -> str:
    name = tool.get("name")
    if not isinstance(name, str) or not _TOOL_NAME.match(name):
        raise ValidationError(where, "must be 1 to 64 letters, digits, '_' or '-'")
    return name


def _search(
    tool: Mapping[str, Any], index: int, tools: Sequence[Mapping[str, Any]]
) -> tuple[str, dict[str, Any], Offered | None]:
    """A ``tool_search`` as the function it is offered as: the client's of its parameters,
    the server's of what it can load (`formats.tool_search`: the gateway runs it)."""
    if is_server_search(tool):
        served = Catalog.of(tools).function(tool.get("description"))
        return TOOL_SEARCH, served, Offered(TOOL_SEARCH, search=True, server=True)
    function: dict[str, Any] = {
        "name": TOOL_SEARCH,
        "parameters": tool.get("parameters") or _SEARCH_PARAMETERS,
    }
    if tool.get("description"):
        function["description"] = tool["description"]
    return (
        TOOL_SEARCH,
        {"type": "function", "function": function},
        Offered(TOOL_SEARCH, search=True),
    )


def search_arguments(item: Mapping[str, Any]) -> str:
    """A ``tool_search_call``'s arguments as its function's: JSON (as given when a string)."""
    arguments = item.get("arguments")
    if isinstance(arguments, str):
        return arguments
    return compact_json(arguments)


def search_result_text(item: Mapping[str, Any]) -> str:
    """What a ``tool_search_output`` says to a model offered the tools as chat functions: the
    names it may call now (the tools themselves are in the request's tools); an
    ``additional_tools`` item's the same of the tools it adds."""
    try:
        found = _each(item.get("tools"))
    except ValidationError:
        found = []
    names = [
        _joined(str(group.get("name")) if group else None, str(tool.get("name")))
        for *_, tool, group in found
    ]
    return found_tools_text(names, how="added" if item.get("type") == ADDITIONAL else "found")


def found_tools_text(names: Sequence[str], *, how: str = "found") -> str:
    """What a tool search's result says to a model offered the tools found as chat
    functions (a Responses ``tool_search_output``, Anthropic's ``tool_reference`` blocks)."""
    if not names:
        return f"No tools were {how}."
    return f"Tools {how}, callable from now on: " + ", ".join(names) + "."


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


def custom_function(name: str, description: object, fmt: object) -> dict[str, Any]:
    """A custom tool as the chat function it is offered as (its input, a string)."""
    return _function({"type": "custom", "description": description, "format": fmt}, name, None)


def custom_arguments(given: object) -> str:
    """A custom tool's input as its function's arguments (JSON)."""
    return compact_json({INPUT: given if isinstance(given, str) else ""})


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
    if found.search:
        return _search_call(item, server=found.server)
    if found.local:
        return local_call(item)
    out = {**item, "name": found.name}
    if found.namespace is not None:
        out["namespace"] = found.namespace
    if not found.custom:
        return out
    out.pop("arguments", None)
    out["type"], out[INPUT] = "custom_tool_call", custom_input(str(item.get("arguments", "")))
    if isinstance(item.get("id"), str):
        out["id"] = "ctc_" + item["id"].removeprefix("fc_")
    return out


def _search_call(item: Mapping[str, Any], *, server: bool = False) -> dict[str, Any]:
    """A call of a ``tool_search`` as its ``tool_search_call`` (the client's, or the
    server's: the gateway's own): its arguments as the object they are (as the model wrote
    them when they are no JSON)."""
    parsed = parsed_arguments(str(item.get("arguments", "")))
    call_id = str(item.get("id", "")).removeprefix("fc_")
    return {
        "id": f"tsc_{call_id}",
        "type": "tool_search_call",
        "call_id": item.get("call_id"),
        "execution": "server" if server else "client",
        "status": item.get("status") or "completed",
        "arguments": parsed,
    }


def custom_input(arguments: str) -> str:
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
    a namespaced call under its joined name, a custom tool's or a tool search's call and
    output as a function's."""
    kind = item.get("type")
    if kind == "custom_tool_call":  # its id, of another prefix, is left out
        rest = {k: v for k, v in item.items() if k not in ("id", "namespace", INPUT)}
        arguments = custom_arguments(item.get(INPUT, ""))
        return {**rest, "type": "function_call", "name": flat_name(item), "arguments": arguments}
    if kind == "custom_tool_call_output":
        rest = {k: v for k, v in item.items() if k != "id"}
        return {**rest, "type": "function_call_output"}
    if kind == "tool_search_call":
        return {
            "type": "function_call",
            "call_id": item.get("call_id"),
            "name": TOOL_SEARCH,
            "arguments": search_arguments(item),
            **({"status": item["status"]} if item.get("status") else {}),
        }
    if kind == "tool_search_output":
        output = search_result_text(item)
        return {"type": "function_call_output", "call_id": item.get("call_id"), "output": output}
    if kind in LOCAL_CALLS:
        name, arguments = call_of(item)
        called = {"type": "function_call", "call_id": item.get("call_id"), "name": name}
        return {**called, "arguments": arguments}
    if kind in LOCAL_OUTPUTS:
        said = {"type": "function_call_output", "call_id": item.get("call_id")}
        return {**said, "output": output_text(item)}
    if kind == ADDITIONAL:  # its tools are offered as functions: a note of them
        return {"type": "message", "role": "developer", "content": search_result_text(item)}
    if kind == "function_call" and item.get("namespace"):
        rest = {k: v for k, v in item.items() if k != "namespace"}
        return {**rest, "name": flat_name(item)}
    return dict(item)
