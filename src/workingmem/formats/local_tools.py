"""The Responses API's tools the client runs on its own machine: ``shell`` (commands, in a
``local`` environment) and ``apply_patch`` (a file created, updated by a diff, or deleted), as
the OpenAI Agents SDK's `ShellTool` and `ApplyPatchTool` send them. Each upstream is offered a
function of the same name whose parameters are what the call carries; a call of it comes back
as the client's item (a ``shell_call`` with its ``action``, an ``apply_patch_call`` with its
``operation``), and those items and their outputs are seen by the upstream as that function's
calls and results:

    function = local_function(tool, index)        # the chat function of a shell or apply_patch
    item = local_call(function_call_item)          # a shell_call or an apply_patch_call
    name, arguments = call_of(stored_call_item)    # as the function call the upstream made
    text = output_text(stored_output_item)         # its result, as the model reads it

A ``shell`` whose environment is a container is one the server runs: a hosted tool, refused.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from ..errors import ValidationError
from . import compact_json, parsed_arguments

__all__ = [
    "APPLY_PATCH",
    "LOCAL_CALLS",
    "LOCAL_OUTPUTS",
    "SHELL",
    "call_of",
    "local_call",
    "local_function",
    "output_text",
]

SHELL = "shell"
APPLY_PATCH = "apply_patch"
LOCAL_CALLS = {"shell_call": SHELL, "apply_patch_call": APPLY_PATCH}
"""A local tool's call item, by type: the tool (and the function) it calls."""
LOCAL_OUTPUTS = ("shell_call_output", "apply_patch_call_output")
_ID_PREFIX = {SHELL: "sh", APPLY_PATCH: "apc"}

_OPERATIONS = ["create_file", "update_file", "delete_file"]
_SHELL: dict[str, Any] = {
    "description": "Runs shell commands on the user's machine and returns what they print "
    "(stdout, stderr) and how each ended (its exit code, or a timeout).",
    "parameters": {
        "type": "object",
        "properties": {
            "commands": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The commands to run, in order, each a shell command line.",
            },
            "timeout_ms": {"type": "integer", "description": "How long they may run, in ms."},
            "max_output_length": {
                "type": "integer",
                "description": "The most characters of output to return.",
            },
        },
        "required": ["commands"],
    },
}
_APPLY_PATCH: dict[str, Any] = {
    "description": "Creates, updates or deletes one file on the user's machine. A diff is in "
    "the V4A format: to create a file, each of its lines prefixed with '+'; to update one, "
    "hunks of lines, each kept line prefixed with ' ', each removed with '-', each added with "
    "'+', a hunk that may start with '@@ <a line of the file to find it by>'.",
    "parameters": {
        "type": "object",
        "properties": {
            "operation": {
                "type": "object",
                "properties": {
                    "type": {"type": "string", "enum": _OPERATIONS},
                    "path": {"type": "string", "description": "The file's path."},
                    "diff": {
                        "type": "string",
                        "description": "The diff (create_file and update_file).",
                    },
                },
                "required": ["type", "path"],
            }
        },
        "required": ["operation"],
    },
}


def local_function(tool: Mapping[str, Any], index: int) -> dict[str, Any]:
    """The chat function a ``shell`` or ``apply_patch`` tool is offered as; a shell in a
    container (one the server runs) is refused, named."""
    kind = str(tool.get("type"))
    if kind == SHELL:
        environment = tool.get("environment")
        where = environment.get("type") if isinstance(environment, Mapping) else None
        if where not in (None, "local"):
            raise ValidationError(
                f"tools[{index}].environment.type",
                f"a shell in a {where!r} environment is run by the server, which the gateway "
                "is not: give the environment 'local', and run its calls",
            )
    spec = _SHELL if kind == SHELL else _APPLY_PATCH
    return {"type": "function", "function": {"name": kind, **spec}}


def local_call(item: Mapping[str, Any]) -> dict[str, Any]:
    """A ``function_call`` of ``shell`` or ``apply_patch`` as the client's call item: its
    arguments as the action (the commands, a list) or the operation they are."""
    kind = str(item.get("name"))
    arguments = _object(item.get("arguments"))
    call_id = str(item.get("id", "")).removeprefix("fc_") or uuid.uuid4().hex
    call: dict[str, Any] = {
        "id": f"{_ID_PREFIX[kind]}_{call_id}",
        "call_id": item.get("call_id"),
        "status": item.get("status") or "completed",
    }
    if kind == SHELL:
        commands = arguments.get("commands")
        action: dict[str, Any] = {
            "commands": [commands] if isinstance(commands, str) else list(commands or ()),
        }
        for key in ("timeout_ms", "max_output_length"):
            if isinstance(arguments.get(key), int):
                action[key] = arguments[key]
        return {"type": "shell_call", **call, "action": action}
    operation = arguments.get("operation", arguments)
    return {"type": "apply_patch_call", **call, "operation": operation}


def call_of(item: Mapping[str, Any]) -> tuple[str, str]:
    """A stored ``shell_call`` or ``apply_patch_call`` as the function call the upstream
    made: its name and its arguments (JSON)."""
    if item.get("type") == "shell_call":
        action = item.get("action")
        return SHELL, compact_json(action if isinstance(action, Mapping) else {})
    return APPLY_PATCH, compact_json({"operation": item.get("operation")})


def output_text(item: Mapping[str, Any]) -> str:
    """What a ``shell_call_output`` or an ``apply_patch_call_output`` says to the model: each
    command's output and how it ended; the patch's status and its output."""
    if item.get("type") == "apply_patch_call_output":
        said = [f"status: {item.get('status')}", str(item.get("output") or "")]
        return "\n".join(part for part in said if part)
    chunks = item.get("output")
    parts: list[str] = []
    for chunk in chunks if isinstance(chunks, list) else ():
        if not isinstance(chunk, Mapping):
            continue
        for stream in ("stdout", "stderr"):
            if chunk.get(stream):
                parts.append(f"{stream}:\n{chunk[stream]}")
        parts.append(_outcome(chunk.get("outcome")))
    return "\n".join(parts)


def _outcome(outcome: object) -> str:
    if isinstance(outcome, Mapping) and outcome.get("type") == "timeout":
        return "timed out"
    code = outcome.get("exit_code") if isinstance(outcome, Mapping) else None
    return f"exit code: {code}"


def _object(arguments: object) -> dict[str, Any]:
    """A call's arguments as an object (none when they are no JSON object)."""
    parsed = parsed_arguments(arguments) if isinstance(arguments, str) else arguments
    return dict(parsed) if isinstance(parsed, Mapping) else {}
