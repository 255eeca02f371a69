"""The text of a file a client attached, for a model that reads nothing else (the local model).

    file_text("data:application/pdf;base64,JVBERi0...")  # "Budget: 4,000 euros.\n\n..."

A text model cannot see a PDF, but it can read what the PDF says: its pages' text, as pypdf
extracts it, or a text file's own text. Each file is read once while it stays among the
recent ones of its tenant (a thread resends its window, files included, with every call).
"""

from __future__ import annotations

import functools
import io

from ..data_urls import decoded_data_url, is_text
from ..tokens._recent import counting_scope

__all__ = ["MAX_CHARS", "file_text"]

MAX_CHARS = 100_000
"""The most of one file's text a model is given: far more than the local model's window, so
that the window's budget, not this, is what limits it."""


def file_text(file_data: str) -> str | None:
    """The text of a file sent inline (a ``data:`` URL or base64): a text file's, a PDF's
    pages' (extraction stops past `MAX_CHARS`); None for another kind of file, or one that
    cannot be read. Kept per tenant, as counts are (`counting_scope`): a file read quicker
    because another tenant sent it would tell them so."""
    scope = counting_scope()
    return _read(file_data) if scope is None else _kept(scope, file_data)


@functools.lru_cache(maxsize=16)
def _kept(scope: str, file_data: str) -> str | None:
    return _read(file_data)


def _read(file_data: str) -> str | None:
    found = decoded_data_url(file_data)
    if found is None:
        return None
    media, data = found
    if is_text(media):
        return data.decode("utf-8", errors="replace")[:MAX_CHARS]
    if not data.startswith(b"%PDF-"):
        return None
    from pypdf import PdfReader

    pages: list[str] = []
    try:
        for page in PdfReader(io.BytesIO(data), strict=False).pages:
            pages.append(page.extract_text().strip())
            if sum(map(len, pages)) > MAX_CHARS:
                break
    # pypdf reads bytes a client sent: a damaged or hostile file can fail in any of its
    # layers; the model is then told the file's name only.
    except Exception:
        return None
    text = "\n\n".join(page for page in pages if page)
    return text[:MAX_CHARS] or None
