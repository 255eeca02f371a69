"""The ids a request names, as the OpenAPI document states them.

Every id (a thread's, a user's) follows one rule, `workingmem.messages.check_id`: 1 to 256
characters, no hidden character, no surrounding space, no ``.``/``..`` segment. The library
checks it (a 400 naming the parameter); these annotations publish the same rule, as
`ID_PATTERN`, so that a client or a fuzzer reads from the document exactly what is taken.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Header, Path

from ..messages import ID_PATTERN, MAX_ID_CHARS

__all__ = ["ID_SCHEMA", "ThreadIdHeader", "ThreadIdPath", "UserIdHeader", "UserIdPath"]

ID_SCHEMA: dict[str, Any] = {"minLength": 1, "maxLength": MAX_ID_CHARS, "pattern": ID_PATTERN}
"""Published only: the library enforces the rule, with its own message."""

ThreadIdPath = Annotated[
    str,
    Path(description="The thread's id, as the application chose it", json_schema_extra=ID_SCHEMA),
]
UserIdPath = Annotated[
    str, Path(description="The user's id, as the application chose it", json_schema_extra=ID_SCHEMA)
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
