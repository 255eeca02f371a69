"""What the wire schemas of the service's APIs share: ids, long texts, open shapes.

class TextBlock(OpenShape):      # fields beyond those named are kept as sent
    type: Literal["text"]
    text: LongText
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from .params import ID_SCHEMA

__all__ = [
    "Id",
    "LongText",
    "NotClientTool",
    "NotCustom",
    "NotFunctionOrCustom",
    "NotText",
    "OpenShape",
    "not_of",
    "type_is",
]

Id = Annotated[str, Field(json_schema_extra=ID_SCHEMA)]
"""An id by the library's rule (checked by the library, with its message; published here)."""

LongText = Annotated[str, Field(max_length=1_000_000)]
"""A text of a message or a block."""


class OpenShape(BaseModel):
    """A shape whose fields beyond those named are kept as sent (the SDKs add fields)."""

    model_config = ConfigDict(extra="allow")


def not_of(*served: str) -> Any:
    """A ``type`` of none of `served` (what a discriminator's ``"other"`` branch takes), said
    so in the published schema."""
    return Annotated[
        str, Field(min_length=1, max_length=64, json_schema_extra={"not": {"enum": list(served)}})
    ]


NotCustom = not_of("custom")
"""The ``type`` of an Anthropic tool other than its client tools (``custom``): one the
gateway does not run, refused with a 400 that names it."""
NotFunctionOrCustom = not_of("function", "custom")
"""The ``type`` of a tool in a Responses ``namespace`` that is neither a function nor custom,
or of a tool choice that names neither."""
NotText = not_of("text")
"""The ``type`` of an Anthropic block that is no text (in a system message: refused)."""
NotClientTool = not_of("function", "custom", "namespace", "tool_search", "shell", "apply_patch")
"""The ``type`` of a Responses tool the gateway does not offer: neither a function, a custom
tool, a ``namespace`` of them, a tool search, nor a ``shell`` or ``apply_patch``."""


def type_is(*served: str, untyped: bool = False) -> Callable[[Any], str]:
    """A discriminator: the ``type`` of a value (as sent, or as its model) that is one of
    `served` (the first for a value of none, with `untyped`), else ``"other"``."""

    def kind(value: Any) -> str:
        found = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
        if untyped and found is None:
            return served[0]
        return found if found in served else "other"

    return kind
