"""An ``allowed_tools`` tool choice: the model may call only the tools it names, while every
tool stays in the request (OpenAI's way to restrict the tools without changing the prompt,
which keeps its cache). The gateway keeps it in chat's shape:

    {"type": "allowed_tools",
     "allowed_tools": {"mode": "auto", "tools": [{"type": "function", "function": {"name": "f"}}]}}

The Responses API says the same with ``mode`` and ``tools`` (``{"type": "function", "name":
"f"}``) at the top; Anthropic has no such choice: there the tools are cut to those named, and
``required`` is ``any``. The gateway's own agent-memory tools, which the client does not know
of, are allowed beside the client's (`allowing`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import ValidationError
from . import unserved_tool

__all__ = [
    "ALLOWED_TOOLS",
    "allowed_names",
    "allowing",
    "chat_allowed",
    "checked",
    "responses_allowed",
    "responses_choice",
]

ALLOWED_TOOLS = "allowed_tools"
_MODES = ("auto", "required")
_CLIENT_KINDS = ("function", "custom")


def allowed_names(choice: object) -> tuple[str, list[str]] | None:
    """(mode, the tools' names) of a chat ``allowed_tools`` choice; None for another."""
    if not isinstance(choice, Mapping) or choice.get("type") != ALLOWED_TOOLS:
        return None
    allowed = choice.get(ALLOWED_TOOLS) or {}
    names = [_chat_name(tool) for tool in allowed.get("tools", ())]
    return str(allowed.get("mode", "auto")), names


def _chat_name(tool: Mapping[str, Any]) -> str:
    """The name of a tool as chat names it in a choice: under its type's key (``function``,
    ``custom``)."""
    return str((tool.get(str(tool.get("type"))) or {}).get("name"))


def chat_allowed(mode: str, names: Iterable[str]) -> dict[str, Any]:
    """The chat ``allowed_tools`` choice of these function tools."""
    tools = [{"type": "function", "function": {"name": name}} for name in names]
    return {"type": ALLOWED_TOOLS, ALLOWED_TOOLS: {"mode": mode, "tools": tools}}


def allowing(options: Mapping[str, Any] | None, names: Iterable[str]) -> Mapping[str, Any] | None:
    """`options` whose ``allowed_tools`` choice (if any) allows the tools `names` too: the
    gateway's own, offered beside the client's."""
    found = allowed_names((options or {}).get("tool_choice"))
    extra = [name for name in names if found is not None and name not in found[1]]
    if found is None or not extra:
        return options
    return {**(options or {}), "tool_choice": chat_allowed(found[0], [*found[1], *extra])}


def checked(choice: object, field: str) -> None:
    """Refuses an ``allowed_tools`` choice (its ``mode`` and ``tools``) whose mode is not
    OpenAI's or whose tools are not a list of function and custom tools (the client's: the
    only tools the gateway serves), naming the place."""
    if not isinstance(choice, Mapping):
        raise ValidationError(field, "must be an object with mode and tools")
    tools = choice.get("tools")
    if choice.get("mode") not in _MODES:
        raise ValidationError(f"{field}.mode", f"must be one of {', '.join(_MODES)}")
    if not isinstance(tools, list):
        raise ValidationError(f"{field}.tools", "must be a list of tools")
    for index, tool in enumerate(tools):
        if not isinstance(tool, Mapping) or tool.get("type") not in _CLIENT_KINDS:
            kind = tool.get("type") if isinstance(tool, Mapping) else tool
            raise unserved_tool(index, kind, "function and custom", within=f"{field}.")


def responses_allowed(choice: Mapping[str, Any]) -> dict[str, Any]:
    """A Responses ``allowed_tools`` choice in chat's shape (checked)."""
    checked(choice, "tool_choice")
    names = (str(tool.get("name")) for tool in choice["tools"])
    return chat_allowed(str(choice["mode"]), names)


def responses_choice(choice: Mapping[str, Any]) -> dict[str, Any]:
    """A chat ``allowed_tools`` choice in the Responses API's shape."""
    found = allowed_names(choice)
    assert found is not None
    tools = [{"type": "function", "name": name} for name in found[1]]
    return {"type": ALLOWED_TOOLS, "mode": found[0], "tools": tools}
