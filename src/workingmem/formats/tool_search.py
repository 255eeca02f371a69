"""A Responses ``tool_search`` the server runs (the API's default, and the OpenAI Agents SDK's
`ToolSearchTool()`): the gateway is that server. The tools marked ``defer_loading`` (a
namespace's, or a function of the request's own) are not offered at first; the model is
offered a function ``tool_search`` whose description lists what it can load (each namespace's
name and description, each deferred function's), and a call of it loads tools by name.

    catalog = Catalog.of(request_tools)
    function = catalog.function(description)       # the chat function offered
    found = catalog.find({"paths": ["crm"]})       # the tools loaded, as the client gave them

A path names a namespace (all its deferred tools), a namespace's tool (``crm.find_order``, or
``crm__find_order`` as chat names it), or a deferred function; a path that names none of them
loads those whose name or description has each of its words (a model that wrote a query). What
it loads comes back as the client gave it (a namespace with the tools found), for the
``tool_search_output`` item.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DEFERRED", "Catalog", "is_server_search"]

DEFERRED = "defer_loading"
"""A tool's field that defers it until a tool search loads it."""
_KIND = "tool_search"
_SEPARATORS = re.compile(r"\.|__|/")
_WORD = re.compile(r"\w+")
_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "paths": {
            "type": "array",
            "items": {"type": "string"},
            "description": "The names to load, as listed: a namespace loads all its tools, "
            "'<namespace>.<tool>' one of them.",
        }
    },
    "required": ["paths"],
}
_ABOUT = (
    "Loads tools that are not loaded yet, so that you can call them from then on. Give the "
    "names of what you need, as listed below."
)


def is_server_search(tool: Mapping[str, Any]) -> bool:
    """A ``tool_search`` the server runs: its ``execution`` is ``server``, or left out."""
    return tool.get("type") == _KIND and tool.get("execution") in (None, "server")


@dataclass(frozen=True, slots=True)
class _Entry:
    """What the model can load by one name: a namespace's deferred tools, or one function."""

    name: str
    description: str
    tools: list[Mapping[str, Any]]
    group: Mapping[str, Any] | None = None
    """The namespace tool the entry's tools are in."""


@dataclass(frozen=True, slots=True)
class Catalog:
    """The deferred tools of a request, by what loads them."""

    entries: list[_Entry] = field(default_factory=list)

    @classmethod
    def of(cls, tools: Sequence[Mapping[str, Any]]) -> Catalog:
        entries: list[_Entry] = []
        for tool in tools:
            if tool.get("type") == "namespace":
                inner = tool.get("tools")
                members = [t for t in inner if _deferred(t)] if isinstance(inner, list) else []
                if members:
                    entries.append(
                        _Entry(_text(tool, "name"), _text(tool, "description"), members, tool)
                    )
            elif _deferred(tool):
                entries.append(_Entry(_text(tool, "name"), _text(tool, "description"), [tool]))
        return cls(entries)

    def function(self, description: str | None) -> dict[str, Any]:
        """The chat function the search is offered as: what it can load, in its
        description (the client's own description first, when it gave one)."""
        listed = "\n".join(
            f"- {entry.name}{_members(entry)}"
            + (f": {entry.description}" if entry.description else "")
            for entry in self.entries
        )
        loads = f"What it can load:\n{listed}" if listed else "Nothing is left to load."
        return {
            "type": "function",
            "function": {
                "name": _KIND,
                "description": f"{description or _ABOUT}\n\n{loads}",
                "parameters": _PARAMETERS,
            },
        }

    def find(self, arguments: object) -> list[dict[str, Any]]:
        """The tools a call's `arguments` load, as the client gave them (a namespace with the
        tools found in it), in the request's order, each once."""
        wanted: dict[int, set[int]] = {}
        for path in _paths(arguments):
            for at, named in self._named(path):
                wanted.setdefault(at, set()).update(id(tool) for tool in named)
        found: list[dict[str, Any]] = []
        for at in sorted(wanted):
            entry = self.entries[at]
            tools: list[dict[str, Any]] = [
                dict(tool) for tool in entry.tools if id(tool) in wanted[at]
            ]
            if entry.group is None:
                found += tools
            else:
                found.append({**entry.group, "tools": tools})
        return found

    def _named(self, path: str) -> list[tuple[int, list[Mapping[str, Any]]]]:
        """The entries' tools `path` names: an entry whole (a namespace, a function), a
        namespace's tool (``crm.find_order``, or bare when no entry has that name), else the
        tools whose name or description, or their namespace's, has each of its words."""
        key = path.strip().casefold()
        for at, entry in enumerate(self.entries):
            if entry.name.casefold() == key:
                return [(at, entry.tools)]
        head, _, member = _SEPARATORS.sub(".", key, count=1).partition(".")
        if not member:
            head, member = "", key
        exact = [
            (at, named)
            for at, entry in enumerate(self.entries)
            if entry.group is not None and head in ("", entry.name.casefold())
            if (named := [t for t in entry.tools if _text(t, "name").casefold() == member])
        ]
        if exact:
            return exact
        words = _WORD.findall(key)
        return [
            (at, matched)
            for at, entry in enumerate(self.entries)
            if words and (matched := [t for t in entry.tools if _has(entry, t, words)])
        ]


def _deferred(tool: object) -> bool:
    return isinstance(tool, Mapping) and tool.get(DEFERRED) is True


def _text(tool: Mapping[str, Any], key: str) -> str:
    value = tool.get(key)
    return value if isinstance(value, str) else ""


def _members(entry: _Entry) -> str:
    if entry.group is None:
        return ""
    return " (" + ", ".join(_text(tool, "name") for tool in entry.tools) + ")"


def _has(entry: _Entry, tool: Mapping[str, Any], words: Sequence[str]) -> bool:
    """Whether each of `words` is in the tool's name or description, or its namespace's."""
    said = " ".join(
        [entry.name, entry.description, _text(tool, "name"), _text(tool, "description")]
    ).casefold()
    return all(word in said for word in words)


def _paths(arguments: object) -> list[str]:
    """The names a call asks for: its ``paths`` (or one ``path``), else its ``query``'s
    words, else the arguments themselves when they are a string."""
    if isinstance(arguments, str):
        return [arguments]
    if not isinstance(arguments, Mapping):
        return []
    paths = arguments.get("paths", arguments.get("path"))
    if isinstance(paths, str):
        return [paths]
    if isinstance(paths, list):
        return [path for path in paths if isinstance(path, str)]
    query = arguments.get("query")
    return [query] if isinstance(query, str) else []
