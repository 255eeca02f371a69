"""What a file or an audio part costs the model, estimated from what it reads or hears.

    file_tokens({"file_data": "data:application/pdf;base64,JVBERi0...", "filename": "a.pdf"},
                count_text)  # pages x PDF_PAGE_TOKENS
    audio_tokens({"data": "UklGR...", "format": "wav"})  # seconds x AUDIO_TOKENS_PER_SECOND

A file or a recording travels as base64 text, and its base64 is not what the model reads: a
two-page PDF of 220 KB is about 200,000 tokens of base64 and about 3,000 tokens to the model.
Counting the base64 made a window drop everything else for one attachment, and a request with a
PDF larger than about 140 KB too large for a 128k model. The providers do not publish their
formulas for files and audio, so these are documented estimates, as images are
(`workingmem.tokens._chat`): a PDF by its pages, a text file by its text, audio by its length.
"""

from __future__ import annotations

import io
import math
import wave
from collections.abc import Callable, Mapping
from typing import Any

from workingmem.data_urls import decoded_data_url, is_text

__all__ = [
    "AUDIO_BYTES_PER_SECOND",
    "AUDIO_TOKENS_PER_SECOND",
    "FILE_TOKENS",
    "PDF_PAGE_TOKENS",
    "audio_tokens",
    "file_tokens",
    "pdf_pages",
]

PDF_PAGE_TOKENS = 1_500
"""A PDF page. OpenAI and Anthropic both put each page in front of the model twice, as its
extracted text and as an image; Anthropic publishes 1,500 to 3,000 tokens a page, and OpenAI's
image of a page (765 tokens at high detail, see `IMAGE_HIGH_DETAIL`) with a page of text comes
to about the same. The lower end: a budget that overestimates drops history for nothing."""

FILE_TOKENS = PDF_PAGE_TOKENS
"""A file whose content is not here (sent by id or by URL) or that is neither a PDF nor text:
one page's worth, since its size to the model cannot be measured."""

AUDIO_TOKENS_PER_SECOND = 10
"""Audio input: OpenAI does not publish how its audio models count a recording; about 10 tokens
a second is the usual estimate, and the one kept here."""

AUDIO_BYTES_PER_SECOND = 16_000
"""How long a recording whose length cannot be read from it is taken to last: an MP3 at
128 kbit/s, the most common rate (WAV's length is read from its header)."""


def pdf_pages(data: bytes) -> int | None:
    """A PDF's page count as its page tree states it (``/Count``: no page is parsed), or None
    when the bytes are not a PDF pypdf can open."""
    if not data.startswith(b"%PDF-"):
        return None
    from pypdf import PdfReader  # imported on the first PDF: most threads never see one

    try:
        root: Any = PdfReader(io.BytesIO(data), strict=False).trailer["/Root"]
        pages = int(root["/Pages"]["/Count"])
    # pypdf reads bytes a client sent: a damaged or hostile file can fail in any of its
    # layers (its own errors, KeyError, TypeError, RecursionError...), and a count is then
    # estimated, never a failed request.
    except Exception:
        return None
    return pages if pages > 0 else None


def file_tokens(file: object, count_text: Callable[[str], int]) -> int:
    """A chat ``file`` part's ``file`` object: a PDF's pages, a text file's text (counted with
    `count_text`), else `FILE_TOKENS`."""
    found = decoded_data_url(file.get("file_data")) if isinstance(file, Mapping) else None
    if found is None:
        return FILE_TOKENS
    media, data = found
    if is_text(media):
        return count_text(data.decode("utf-8", errors="replace"))
    pages = pdf_pages(data) if media in ("", "application/pdf") else None
    return FILE_TOKENS if pages is None else pages * PDF_PAGE_TOKENS


def audio_tokens(audio: object) -> int:
    """A chat ``input_audio`` part's ``input_audio`` object (``data``, ``format``): its length
    in seconds at `AUDIO_TOKENS_PER_SECOND`, at least one token."""
    if not isinstance(audio, Mapping):
        return 1
    found = decoded_data_url(audio.get("data"))
    if found is None:
        return 1
    data = found[1]
    seconds = _wav_seconds(data) if audio.get("format") == "wav" else None
    if seconds is None:
        seconds = len(data) / AUDIO_BYTES_PER_SECOND
    return max(1, math.ceil(seconds * AUDIO_TOKENS_PER_SECOND))


def _wav_seconds(data: bytes) -> float | None:
    try:
        with wave.open(io.BytesIO(data)) as recording:
            rate = recording.getframerate()
            return recording.getnframes() / rate if rate > 0 else None
    except (wave.Error, EOFError):
        return None
