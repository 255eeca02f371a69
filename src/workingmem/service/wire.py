"""What the wire schemas of the service's APIs share: ids, long texts, open shapes.

class TextBlock(OpenShape):      # fields beyond those named are kept as sent
    type: Literal["text"]
    text: LongText
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from .params import ID_SCHEMA

__all__ = ["Id", "LongText", "OpenShape"]

Id = Annotated[str, Field(json_schema_extra=ID_SCHEMA)]
"""An id by the library's rule (checked by the library, with its message; published here)."""

LongText = Annotated[str, Field(max_length=1_000_000)]
"""A text of a message or a block."""


class OpenShape(BaseModel):
    """A shape whose fields beyond those named are kept as sent (the SDKs add fields)."""

    model_config = ConfigDict(extra="allow")
