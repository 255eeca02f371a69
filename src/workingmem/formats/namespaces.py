"""OpenAI's ``namespace`` tools (function tools grouped under a name, as the Codex CLI sends
its agents' tools) for the upstreams, which the gateway asks in chat's terms: each function is
offered as ``<namespace>__<name>``, and a call of that name comes back to the client as a
call of the namespace's function.

    tools = chat_tools(request_tools)          # namespaces flattened (`responses_chat`)
    names = namespaced(request_tools)          # {"crm__find": ("crm", "find")}
    item = in_namespace(call_item, names)      # {"name": "find", "namespace": "crm", ...}
    joined("crm", "find")                      # "crm__find": a stored call's chat name
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ValidationError

__all__ = ["SEPARATOR", "flat_name", "in_namespace", "joined", "namespaced"]

SEPARATOR = "__"
_MAX_NAME = 64
"""The longest function name OpenAI's and Anthropic's APIs take."""


def joined(namespace: str, name: str) -> str:
    """The chat name of the function `name` of `namespace`."""
    return f"{namespace}{SEPARATOR}{name}"


def flat_name(item: Mapping[str, Any]) -> str:
    """The chat name of a ``function_call`` item: its name, joined to its namespace."""
    name, namespace = str(item.get("name")), item.get("namespace")
    return joined(str(namespace), name) if namespace else name


def namespaced(tools: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, str]]:
    """The chat names of a request's namespaced functions, each with its namespace and
    name. A name past 64 characters, or one another tool already has, is refused, named."""
    names: dict[str, tuple[str, str]] = {}
    plain = {tool.get("name") for tool in tools if tool.get("type") == "function"}
    for index, tool in enumerate(tools):
        if tool.get("type") != "namespace":
            continue
        for inner, function in enumerate(tool.get("tools") or ()):
            name = joined(tool["name"], function["name"])
            where = f"tools[{index}].tools[{inner}].name"
            if len(name) > _MAX_NAME:
                raise ValidationError(
                    where,
                    f"{name!r}: a namespace's function is offered to the model as "
                    f"'<namespace>{SEPARATOR}<name>', at most {_MAX_NAME} characters",
                )
            if name in plain or name in names:
                raise ValidationError(where, f"{name!r} names two tools")
            names[name] = (tool["name"], function["name"])
    return names


def in_namespace(item: dict[str, Any], names: Mapping[str, tuple[str, str]]) -> dict[str, Any]:
    """A ``function_call`` item in the client's words: a call of a namespaced function names
    the namespace and the function; any other item is returned as it is."""
    found = names.get(item.get("name", "")) if item.get("type") == "function_call" else None
    if found is None:
        return item
    namespace, name = found
    return {**item, "name": name, "namespace": namespace}
