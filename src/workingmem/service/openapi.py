"""The OpenAPI document of this server as configured: what it serves, exactly.

FastAPI writes the document from the routes; what depends on the configuration is stated
here, once: the profiles a request may name (``X-Profile``), and the agent-memory endpoints
(only the scope served, a PUT only when writes are on, its body in the mode's shape). And one
correction: an optional header is a string, not a nullable value. So a client, or a fuzzer,
that reads the document finds every request it allows taken.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any

from fastapi import FastAPI

from ..agent_memory import AgentMemoryConfig
from ..agent_memory.modes import TEXT_PATTERN, TextMode

__all__ = ["publish"]

_SCOPE_PATHS = {
    "conversation": "/v1/threads/{thread_id}/working-memory",
    "user": "/v1/users/{user_id}/working-memory",
}


def publish(
    app: FastAPI, *, profiles: Iterable[str], agent_memory: AgentMemoryConfig | None
) -> Callable[[], dict[str, Any]]:
    """The app's `openapi` method, for `app.openapi = publish(app, ...)`."""
    served = sorted(profiles)
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = copy.deepcopy(generate())
            _headers_are_strings(document)
            _name_profiles(document, served)
            _agent_memory(document, agent_memory)
            app.openapi_schema = document
        return app.openapi_schema

    return openapi


def _headers_are_strings(document: dict[str, Any]) -> None:
    """An optional header is absent or a string, never JSON's null: FastAPI writes an
    optional parameter as ``anyOf: [its type, null]``, which for a header says that the text
    "null" would mean no value."""
    for operation in _operations(document):
        for parameter in operation.get("parameters", ()):
            schema = parameter.get("schema", {})
            branches = [b for b in schema.get("anyOf", ()) if b.get("type") != "null"]
            if parameter["in"] == "header" and len(branches) == 1:
                rest = {k: v for k, v in schema.items() if k != "anyOf"}
                parameter["schema"] = {**branches[0], **rest}


def _name_profiles(document: dict[str, Any], profiles: list[str]) -> None:
    for operation in _operations(document):
        for parameter in operation.get("parameters", ()):
            if parameter["in"] == "header" and parameter["name"] == "X-Profile":
                parameter["schema"] = {"type": "string", "enum": profiles}
                parameter["description"] = "A profile this server serves (else `default`)"


def _agent_memory(document: dict[str, Any], config: AgentMemoryConfig | None) -> None:
    paths: dict[str, Any] = document["paths"]
    for scope, path in _SCOPE_PATHS.items():
        if config is None or config.scope != scope:
            paths.pop(path, None)
        elif not config.enabled:
            paths[path].pop("put", None)
    if config is None:
        return
    content = document["components"]["schemas"]["WorkingMemoryPut"]["properties"]["content"]
    content.clear()
    mode = config.mode
    if isinstance(mode, TextMode):
        content.update(
            type="string",
            minLength=1,
            maxLength=mode.max_chars,
            pattern=TEXT_PATTERN,
            description="The whole document: text with something besides spaces, no NUL",
        )
    else:
        content.update(
            type="object",
            description=(
                "Merged into the stored document (``replace``: stored as it is), which must "
                "then match the server's schema, in at most "
                f"{mode.max_chars} characters of compact JSON"
            ),
        )


def _operations(document: dict[str, Any]) -> Iterable[dict[str, Any]]:
    for item in document["paths"].values():
        yield from (op for method, op in item.items() if method in _METHODS)


_METHODS = frozenset({"get", "put", "post", "delete", "patch"})
