"""The ids a request names, as the OpenAPI document states them.

Every id (a thread's, a user's) follows one rule, `workingmem.messages.check_id`: 1 to 256
characters, no hidden character, no surrounding space, no ``.``/``..`` segment. The library
checks it (a 400 naming the parameter); these annotations publish the same rule, as
`ID_PATTERN`, so that a client or a fuzzer reads from the document exactly what is taken.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import Depends, Header, Path, Query
from starlette.requests import HTTPConnection

from ..messages import ID_PATTERN, MAX_ID_CHARS
from .errors import ApiError

__all__ = [
    "ASK_HEADERS_DOC",
    "ID_SCHEMA",
    "AfterQuery",
    "AskHeaders",
    "AskedHeaders",
    "CompletionIdPath",
    "ItemIdPath",
    "LimitQuery",
    "OrderQuery",
    "Page",
    "PageQuery",
    "ResponseIdPath",
    "ThreadIdPath",
    "UserIdHeader",
    "UserIdPath",
    "ask_headers",
    "header_text",
    "thread_header",
]

ID_SCHEMA: dict[str, Any] = {"minLength": 1, "maxLength": MAX_ID_CHARS, "pattern": ID_PATTERN}
"""Published only: the library enforces the rule, with its own message."""

ThreadIdPath = Annotated[
    str,
    Path(description="The thread's id, as the application chose it", json_schema_extra=ID_SCHEMA),
]
UserIdPath = Annotated[
    str, Path(description="The user's id, as the application chose it", json_schema_extra=ID_SCHEMA)
]
OrderQuery = Annotated[Literal["asc", "desc"], Query(description="Oldest or newest first")]
AfterQuery = Annotated[
    str | None,
    Query(description="The id of the item a page starts after", json_schema_extra=ID_SCHEMA),
]
LimitQuery = Annotated[int, Query(ge=1, le=100, description="At most this many items")]


@dataclass(frozen=True, slots=True)
class PageQuery:
    """A page of a list of items: its order, the item it starts after, its length."""

    order: Literal["asc", "desc"]
    after: str | None
    limit: int


async def _page(
    order: OrderQuery = "desc", after: AfterQuery = None, limit: LimitQuery = 20
) -> PageQuery:
    """The query's page (a coroutine, like `ask_headers`: FastAPI runs a class or a plain
    function dependency in its thread pool)."""
    return PageQuery(order, after, limit)


Page = Annotated[PageQuery, Depends(_page)]


ResponseIdPath = Annotated[
    str, Path(description="A stored response's id (``resp_...``)", json_schema_extra=ID_SCHEMA)
]
CompletionIdPath = Annotated[
    str,
    Path(
        description="A stored chat completion's id (``chatcmpl-...``)", json_schema_extra=ID_SCHEMA
    ),
]
ItemIdPath = Annotated[
    str, Path(description="An item's id, as the item lists give it", json_schema_extra=ID_SCHEMA)
]
UserIdHeader = Annotated[
    str | None,
    Header(
        alias="X-User-Id",
        description="The user who speaks (else the body's `user`)",
        json_schema_extra=ID_SCHEMA,
    ),
]


def header_text(value: str | None) -> str | None:
    """A header's text: HTTP gives latin-1, clients (httpx, the SDK) send UTF-8 for anything
    beyond ASCII, so a value that is valid UTF-8 is read as UTF-8."""
    if value is None:
        return None
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeError:
        return value


def thread_header(thread_id: str) -> dict[str, str]:
    """The thread answered, always said: a client that named none learns the one found."""
    return {"X-Thread-Id": thread_id.encode("utf-8").decode("latin-1")}  # UTF-8 on the wire


@dataclass(frozen=True, slots=True)
class AskedHeaders:
    """The headers of a request the model answers: its thread, user, profile and history,
    read as UTF-8 (`header_text`)."""

    x_thread_id: str | None
    x_user_id: str | None
    x_profile: str | None
    x_history: Literal["memory", "client"] | None


_HISTORIES: dict[str | None, Literal["memory", "client"] | None] = {
    None: None,
    "memory": "memory",
    "client": "client",
}


async def ask_headers(request: HTTPConnection) -> AskedHeaders:
    """Read from the request itself, not declared one by one: FastAPI re-examines each
    declared header's annotation on every request (40 µs for these four, measured), on the
    path every model call takes. `ASK_HEADERS_DOC` publishes them. A coroutine, so that
    FastAPI calls it on the loop rather than in its thread pool."""
    headers = request.headers
    history = headers.get("x-workingmem-history")
    if history not in _HISTORIES:
        where = "header.X-Workingmem-History"
        raise ApiError(
            422,
            f"{where}: Input should be 'memory' or 'client'",
            code="invalid_request",
            param=where,
        )
    return AskedHeaders(
        header_text(headers.get("x-thread-id")),
        header_text(headers.get("x-user-id")),
        header_text(headers.get("x-profile")),
        _HISTORIES[history],
    )


AskHeaders = Annotated[AskedHeaders, Depends(ask_headers)]
"""A route parameter: the ask headers; the route declares them with
``openapi_extra=ASK_HEADERS_DOC``."""


def _header_doc(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "in": "header",
        "required": False,
        "schema": {"type": "string", "description": description, **schema, "title": name},
        "description": description,
    }


ASK_HEADERS_DOC: dict[str, Any] = {
    "parameters": [
        _header_doc("X-Thread-Id", "The thread the request continues", ID_SCHEMA),
        _header_doc("X-User-Id", "The user who speaks (else the body's `user`)", ID_SCHEMA),
        _header_doc("X-Profile", "A profile this server serves (else `default`)", {}),
        _header_doc(
            "X-Workingmem-History",
            "What the model reads: the thread's memory, or the client's own messages (input) "
            "as sent (else the profile's `history`)",
            {"enum": ["memory", "client"]},
        ),
    ]
}
"""The OpenAPI parameters of `AskHeaders`, as FastAPI would have written them (the profiles
a server serves are named by `workingmem.service.openapi`)."""
