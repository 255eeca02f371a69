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

from workingmem.data_urls import decoded_data_url, is_pdf, is_text, split_data_url
from workingmem.tokens._recent import RecentCounts

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
    data = file.get("file_data") if isinstance(file, Mapping) else None
    found = split_data_url(data)
    if found is None:
        return FILE_TOKENS
    media, payload = found
    if is_text(media):
        text = decoded_data_url(data)
        return FILE_TOKENS if text is None else count_text(text[1].decode("utf-8", "replace"))
    pages = _PAGES(payload) if is_pdf(media, payload) else 0
    return pages * PDF_PAGE_TOKENS if pages else FILE_TOKENS


def _pages_of(payload: str) -> int:
    found = decoded_data_url(payload)
    return (pdf_pages(found[1]) or 0) if found is not None else 0


_PAGES = RecentCounts(_pages_of, max_chars=16 << 20, min_chars=0)
"""A PDF's pages by its base64, kept per tenant as a text's count is (`RecentCounts`): an ask
counts its question twice (to choose the window, then to store it), and a thread counted
with a second tokenizer counts its files again; pypdf reads each once."""


def audio_tokens(audio: object) -> int:
    """A chat ``input_audio`` part's ``input_audio`` object (``data``, ``format``): its length
    in seconds at `AUDIO_TOKENS_PER_SECOND`, at least one token. Only a WAV's header is
    decoded; another recording's length comes from its base64's length."""
    found = split_data_url(audio.get("data")) if isinstance(audio, Mapping) else None
    if found is None or decoded_data_url(found[1][:4]) is None:
        return 1
    payload = found[1]
    seconds = None
    if isinstance(audio, Mapping) and audio.get("format") == "wav":
        head = decoded_data_url(payload[:_WAV_HEAD])
        seconds = _wav_seconds(head[1]) if head is not None else None
    if seconds is None:
        padding = len(payload) - len(payload.rstrip("="))
        seconds = (len(payload) * 3 // 4 - padding) / AUDIO_BYTES_PER_SECOND
    return max(1, math.ceil(seconds * AUDIO_TOKENS_PER_SECOND))


_WAV_HEAD = 4096
"""The base64 characters of a WAV read for its header (3 KB: its format and the size of its
samples, before any sample)."""


def _wav_seconds(data: bytes) -> float | None:
    try:
        with wave.open(io.BytesIO(data)) as recording:
            rate = recording.getframerate()
            return recording.getnframes() / rate if rate > 0 else None
    except (wave.Error, EOFError):
        return None
