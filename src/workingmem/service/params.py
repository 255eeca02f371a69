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

from ..messages import ID_PATTERN, MAX_ID_CHARS

__all__ = [
    "ID_SCHEMA",
    "AfterQuery",
    "AskHeaders",
    "HistoryHeader",
    "ItemIdPath",
    "LimitQuery",
    "OrderQuery",
    "Page",
    "PageQuery",
    "ProfileHeader",
    "ResponseIdPath",
    "ThreadIdHeader",
    "ThreadIdPath",
    "UserIdHeader",
    "UserIdPath",
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
ProfileHeader = Annotated[str | None, Header(alias="X-Profile")]
HistoryHeader = Annotated[
    Literal["memory", "client"] | None,
    Header(
        alias="X-Workingmem-History",
        description="What the model reads: the thread's memory, or the client's own messages "
        "(input) as sent (else the profile's `history`)",
    ),
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
    """The query's page (a coroutine, like `_ask_headers`: FastAPI runs a class or a plain
    function dependency in its thread pool)."""
    return PageQuery(order, after, limit)


Page = Annotated[PageQuery, Depends(_page)]


ResponseIdPath = Annotated[
    str, Path(description="A stored response's id (``resp_...``)", json_schema_extra=ID_SCHEMA)
]
ItemIdPath = Annotated[
    str, Path(description="An item's id, as the item lists give it", json_schema_extra=ID_SCHEMA)
]
ThreadIdHeader = Annotated[
    str | None,
    Header(
        alias="X-Thread-Id",
        description="The thread the request continues",
        json_schema_extra=ID_SCHEMA,
    ),
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
class _AskHeaders:
    """The headers of a request the model answers: its thread, user, profile and history,
    read as UTF-8 (`header_text`)."""

    x_thread_id: str | None
    x_user_id: str | None
    x_profile: str | None
    x_history: Literal["memory", "client"] | None


async def _ask_headers(
    x_thread_id: ThreadIdHeader = None,
    x_user_id: UserIdHeader = None,
    x_profile: ProfileHeader = None,
    x_history: HistoryHeader = None,
) -> _AskHeaders:
    """A coroutine, so that FastAPI calls it on the loop: a class or a plain function as a
    dependency runs in its thread pool, a trip between threads on every request."""
    return _AskHeaders(
        header_text(x_thread_id), header_text(x_user_id), header_text(x_profile), x_history
    )


AskHeaders = Annotated[_AskHeaders, Depends(_ask_headers)]
