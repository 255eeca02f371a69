"""The three working-memory tools: their definitions for a model, and the executor of a call.

    tools = openai_tools(config.mode)        # [{"type": "function", "function": {...}}, ...]
    tools = anthropic_tools(config.mode)     # [{"name": ..., "input_schema": {...}}, ...]
    text = await agent_memory.execute_tool(call.name, call.arguments, tenant_id="t1",
                                           conversation_id="c1", user_id="u1")

`get_working_memory()` and `clear_working_memory()` take no arguments;
`update_working_memory(content)` takes the whole document (text modes) or the fields to merge
(schema mode, where `content` is typed by the schema itself). The ids of a call come from the
application, never from the model: keys a model adds (``user_id`` ...) are ignored. Whatever
the model sends, the executor answers with text, an ``Error: ...`` that says what to fix when
the call was bad; it raises only for the application's own mistakes (a missing id) and for
store failures.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ConflictError, ValidationError
from .modes import Mode, SchemaMode

if TYPE_CHECKING:
    from .memory import AgentMemory

__all__ = [
    "CLEAR_TOOL",
    "GET_TOOL",
    "TOOL_NAMES",
    "UPDATE_TOOL",
    "ToolOutcome",
    "anthropic_tools",
    "execute_tool",
    "openai_tools",
    "run_tool",
    "tool_specs",
]

GET_TOOL = "get_working_memory"
UPDATE_TOOL = "update_working_memory"
CLEAR_TOOL = "clear_working_memory"
TOOL_NAMES = (GET_TOOL, UPDATE_TOOL, CLEAR_TOOL)

_NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
_HOISTED = ("$defs", "definitions")


def tool_specs(mode: Mode) -> list[tuple[str, str, dict[str, Any]]]:
    """(name, description, JSON Schema of the arguments) of each tool, for this mode."""
    if isinstance(mode, SchemaMode):
        update = (
            "Update your working memory: send a JSON object with only the fields that change. "
            "Fields you leave out or send as null are kept (null is stored only where the "
            "schema takes null as a value); a list replaces the stored list ([] empties it)."
        )
    else:
        update = (
            "Replace your working memory with a new version: send the complete document, "
            "keeping everything that is still true"
            + (" and the template's shape." if mode.template is not None else ".")
        )
    when = (
        " Call it as soon as you learn something worth keeping across conversations: the "
        "user's name, preferences, goals, decisions, open tasks, or a correction of what is "
        "stored."
    )
    return [
        (
            GET_TOOL,
            "Read your working memory: the notes you keep about the user and this task. Call "
            "it at the start of a conversation, and before answering anything that depends on "
            "what you were told earlier, unless the memory is already in front of you.",
            dict(_NO_ARGUMENTS, properties={}),
        ),
        (
            UPDATE_TOOL,
            update + when + f" At most {mode.max_chars} characters.",
            _update_parameters(mode),
        ),
        (
            CLEAR_TOOL,
            "Erase your working memory. Only when the user asks you to forget what you know "
            "about them; never to correct one detail (update it instead).",
            dict(_NO_ARGUMENTS, properties={}),
        ),
    ]


def openai_tools(mode: Mode) -> list[dict[str, Any]]:
    """The definitions in the OpenAI function-calling format."""
    return [
        {"type": "function", "function": {"name": n, "description": d, "parameters": p}}
        for n, d, p in tool_specs(mode)
    ]


def anthropic_tools(mode: Mode) -> list[dict[str, Any]]:
    """The definitions in Anthropic's tool format."""
    return [{"name": n, "description": d, "input_schema": p} for n, d, p in tool_specs(mode)]


def _update_parameters(mode: Mode) -> dict[str, Any]:
    if not isinstance(mode, SchemaMode):
        what = "The whole new document" + (
            ", in the template's Markdown shape." if mode.template is not None else "."
        )
        content: dict[str, Any] = {"type": "string", "description": what}
        return _object({"content": content})
    content = mode.schema.json_schema
    hoisted = {key: _rebase_refs(content.pop(key)) for key in _HOISTED if key in content}
    content.pop("$schema", None)
    content.pop("$id", None)
    content = _rebase_refs(content)
    note = "Only the fields that change; the stored document keeps the others."
    original = content.get("description")
    content["description"] = f"{note} {original}" if isinstance(original, str) else note
    parameters = _object({"content": content})
    parameters.update(hoisted)
    return parameters


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _rebase_refs(node: Any) -> Any:
    """Moves ``#/...`` references under ``#/properties/content``; the definitions they point
    into (``$defs``, ``definitions``) move to the top of the arguments' schema instead."""
    if isinstance(node, list):
        return [_rebase_refs(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _rebase_refs(value) for key, value in node.items()}
    ref = out.get("$ref")
    if isinstance(ref, str) and not ref.startswith(tuple(f"#/{key}/" for key in _HOISTED)):
        out["$ref"] = "#/properties/content" + ref.removeprefix("#")
    return out


# -- the executor ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What a tool call gives back: the text for the model, and whether the call failed
    (a protocol with an error flag, MCP's ``isError``, sets it from `is_error`)."""

    text: str
    is_error: bool = False


async def execute_tool(
    memory: AgentMemory,
    name: str,
    arguments: object,
    *,
    tenant_id: str,
    conversation_id: str | None,
    user_id: str | None,
) -> str:
    """Runs one tool call against `memory` and returns the text for the model."""
    outcome = await run_tool(
        memory,
        name,
        arguments,
        tenant_id=tenant_id,
        conversation_id=conversation_id,
        user_id=user_id,
    )
    return outcome.text


async def run_tool(
    memory: AgentMemory,
    name: str,
    arguments: object,
    *,
    tenant_id: str,
    conversation_id: str | None,
    user_id: str | None,
) -> ToolOutcome:
    """Runs one tool call against `memory`: the text, flagged when the call was bad."""
    if not memory.config.enabled:
        return _failed("working memory is disabled for this assistant; no tool can use it.")
    if name not in TOOL_NAMES:
        return _failed(
            f"unknown tool {str(name)[:64]!r}; the working-memory tools are "
            + ", ".join(TOOL_NAMES)
            + "."
        )
    ids: dict[str, Any] = {
        "tenant_id": tenant_id,
        "conversation_id": conversation_id,
        "user_id": user_id,
    }
    memory.document_key(**ids)  # the application's ids: a missing one is its bug, and raises
    parsed = _parse_arguments(arguments)
    if isinstance(parsed, ToolOutcome):
        return parsed
    mode = memory.config.mode
    if name == GET_TOOL:
        content = await memory.get_working_memory(**ids)
        return ToolOutcome(content if content is not None else _empty(mode))
    if name == CLEAR_TOOL:
        await memory.clear_working_memory(**ids)
        return ToolOutcome("Cleared the working memory.")
    if "content" not in parsed:
        return _failed(f"{UPDATE_TOOL} needs a 'content' argument: " + _content_hint(mode))
    if parsed["content"] is None:
        return _failed(f"content is null; to empty the working memory call {CLEAR_TOOL}.")
    try:
        result = await memory.update_working_memory(**ids, content=parsed["content"])
    except ValidationError as exc:
        return _invalid_content(exc)
    except ConflictError:
        return _failed(
            "the working memory kept changing while this update was applied; "
            f"call {GET_TOOL} and try again."
        )
    saved = result.document
    if not result.changed:
        return ToolOutcome(
            f"No change: the working memory already holds this (version {saved.version})."
        )
    size = len(saved.content or "")
    text = (
        f"Saved the working memory (version {saved.version}, {size} of "
        f"{mode.max_chars} characters used)."
    )
    if result.ignored_nulls:
        text += ' Null means "no change" there, so these fields were left as they were: ' + (
            ", ".join(result.ignored_nulls) + "."
        )
    return ToolOutcome(text)


def _failed(problem: str) -> ToolOutcome:
    return ToolOutcome(f"Error: {problem}", is_error=True)


def _parse_arguments(arguments: object) -> dict[str, Any] | ToolOutcome:
    value = arguments
    for _ in range(2):  # a JSON text, or a JSON text of a JSON text
        if not isinstance(value, str):
            break
        if not value.strip():
            return {}
        try:
            value = json.loads(value)
        except ValueError:
            return _failed(
                'the arguments are not valid JSON; send a JSON object like {"content": ...}.'
            )
    if value is None:
        return {}
    if not isinstance(value, dict):
        return _failed('the arguments must be a JSON object like {"content": ...}.')
    return value


def _content_hint(mode: Mode) -> str:
    if isinstance(mode, SchemaMode):
        return '{"content": {...the fields that change...}}.'
    return '{"content": "...the whole new document..."}.'


def _empty(mode: Mode) -> str:
    if isinstance(mode, SchemaMode):
        return "The working memory is empty ({})."
    if mode.template is not None:
        return (
            f"The working memory is empty. Start from this template and save it with {UPDATE_TOOL}:"
            f"\n{mode.template}"
        )
    return "The working memory is empty."


def _invalid_content(exc: ValidationError) -> ToolOutcome:
    if exc.field.startswith("$"):
        problem = f"content does not match the schema at {exc.field}: {exc.reason}"
    else:
        problem = f"{exc.field} {exc.reason}"
    return _failed(f"{problem}. Nothing was changed; fix it and call {UPDATE_TOOL} again.")
