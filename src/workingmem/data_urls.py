"""Files as clients send them inline: ``data:<media type>;base64,<data>`` URLs, or bare base64.

    decoded_data_url("data:application/pdf;base64,JVBERg==")  # ("application/pdf", b"%PDF")

Read by the token counts (what a file costs the model) and by the formats (which kind of file an
API is given); it imports nothing of the package, so both stay pure.
"""

from __future__ import annotations

import base64
import binascii

__all__ = ["data_url", "decoded_data_url", "is_text"]

_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/x-yaml")


def data_url(media_type: str, data: str) -> str:
    """A base64 payload as the ``data:`` URL chat's ``file_data`` and ``image_url`` carry."""
    return f"data:{media_type};base64,{data}"


def decoded_data_url(value: object) -> tuple[str, bytes] | None:
    """The media type (lower case, no parameters) and bytes of a ``data:<type>;base64,<data>``
    URL, or of bare base64 (type ``""``); None for anything else (a URL, an id, base64 that does
    not decode)."""
    if not isinstance(value, str) or not value:
        return None
    media = ""
    if value.startswith("data:"):
        header, sep, value = value[5:].partition(",")
        if not sep or not header.endswith(";base64"):
            return None
        media = header[: -len(";base64")].split(";", 1)[0].strip().lower()
    try:
        return media, base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


def is_text(media_type: str) -> bool:
    """Whether a file of this media type is the text the model reads (UTF-8)."""
    return media_type.startswith(_TEXT_TYPES)
