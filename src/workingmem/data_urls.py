"""Files as clients send them inline: ``data:<media type>;base64,<data>`` URLs, or bare base64.

    decoded_data_url("data:application/pdf;base64,JVBERg==")  # ("application/pdf", b"%PDF")

Read by the token counts (what a file costs the model) and by the formats (which kind of file an
API is given); it imports nothing of the package, so both stay pure.
"""

from __future__ import annotations

import base64
import binascii

__all__ = ["data_url", "decoded_data_url", "is_pdf", "is_text", "split_data_url"]

_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/x-yaml")


def data_url(media_type: str, data: str) -> str:
    """A base64 payload as the ``data:`` URL chat's ``file_data`` and ``image_url`` carry."""
    return f"data:{media_type};base64,{data}"


def split_data_url(value: object) -> tuple[str, str] | None:
    """The media type (lower case, no parameters) and base64 payload of a
    ``data:<type>;base64,<data>`` URL, or of bare base64 (type ``""``), nothing decoded; None for
    anything else (a URL, a data URL that is not base64)."""
    if not isinstance(value, str) or not value:
        return None
    if not value.startswith("data:"):
        return "", value
    header, sep, payload = value[5:].partition(",")
    if not sep or not header.endswith(";base64"):
        return None
    return header[: -len(";base64")].split(";", 1)[0].strip().lower(), payload


def decoded_data_url(value: object) -> tuple[str, bytes] | None:
    """`split_data_url` with the payload decoded; None also for base64 that does not decode."""
    found = split_data_url(value)
    if found is None:
        return None
    try:
        return found[0], base64.b64decode(found[1], validate=True)
    except (binascii.Error, ValueError):
        return None


_PDF_BASE64 = base64.b64encode(b"%PDF-")[:6].decode()
"""How every PDF's base64 begins: ``JVBERi``, what ``%PDF-`` starts as."""


def is_pdf(media_type: str, payload: str) -> bool:
    """Whether a `split_data_url` is a PDF (by its first bytes, where a type says nothing or
    says PDF), without decoding it."""
    return media_type in ("", "application/pdf") and payload.startswith(_PDF_BASE64)


def is_text(media_type: str) -> bool:
    """Whether a file of this media type is the text the model reads (UTF-8)."""
    return media_type.startswith(_TEXT_TYPES)
