"""Files and audio counted by what the model reads (workingmem.tokens._media): a PDF by its pages,
a text file by its text, a recording by its length; never by the base64 that carries them."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.helpers import data_url, pdf_bytes, wav_bytes
from workingmem.data_urls import decoded_data_url
from workingmem.tokens import _media, tokenizer_for
from workingmem.tokens._media import (
    AUDIO_BYTES_PER_SECOND,
    AUDIO_TOKENS_PER_SECOND,
    FILE_TOKENS,
    PDF_PAGE_TOKENS,
    pdf_pages,
)
from workingmem.tokens._recent import counting_for
from workingmem.types import ModelInfo

GPT4O = ModelInfo(id="gpt-4o", context_window=128_000)
OVERHEAD = 3 + 1  # the message and its role, "user"


def with_part(part: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": [part]}


def file_part(**file: str) -> dict[str, Any]:
    return {"type": "file", "file": file}


@pytest.mark.parametrize("pages", [1, 3, 12])
def test_a_pdf_counts_its_pages_whatever_its_size(pages: int) -> None:
    """220 KB of PDF is about 200,000 tokens of base64: counted so, it was refused by a 128k
    model. It costs the model its pages."""
    tokenizer = tokenizer_for(GPT4O)
    pdf = pdf_bytes(pages, padding=200_000)
    part = file_part(filename="report.pdf", file_data=data_url("application/pdf", pdf))
    assert tokenizer.count_text(part["file"]["file_data"]) > 100_000
    assert tokenizer.count_message(with_part(part)) == OVERHEAD + pages * PDF_PAGE_TOKENS


def test_a_pdf_in_bare_base64_is_read_as_a_pdf() -> None:
    tokenizer = tokenizer_for(GPT4O)
    part = file_part(file_data=base64.b64encode(pdf_bytes(2)).decode())
    assert tokenizer.count_message(with_part(part)) == OVERHEAD + 2 * PDF_PAGE_TOKENS


def test_a_text_file_counts_its_text() -> None:
    tokenizer = tokenizer_for(GPT4O)
    text = "Budget: 4,000 euros.\nDates: 3 to 17 May.\n" * 50
    part = file_part(filename="notes.txt", file_data=data_url("text/plain", text.encode()))
    assert tokenizer.count_message(with_part(part)) == OVERHEAD + tokenizer.count_text(text)


@pytest.mark.parametrize(
    "file",
    [
        pytest.param({"file_id": "file-abc123"}, id="by-id"),
        pytest.param({"file_data": data_url("application/pdf", b"%PDF-1.7 cut")}, id="broken-pdf"),
        pytest.param(
            {"file_data": data_url("application/zip", b"PK\x03\x04" + bytes(90_000))},
            id="other-type",
        ),
        pytest.param({"file_data": "data:application/pdf;base64,not base64!"}, id="bad-base64"),
        pytest.param({"file_data": data_url("application/pdf", pdf_bytes(0))}, id="no-pages"),
        pytest.param({"file_data": base64.b64encode(b"PK\x03\x04").decode()}, id="bare-not-pdf"),
    ],
)
def test_a_file_it_cannot_measure_counts_one_page(file: dict[str, str]) -> None:
    """A file sent by id, unreadable, or of another kind: one page, never its base64."""
    tokenizer = tokenizer_for(GPT4O)
    assert tokenizer.count_message(with_part(file_part(**file))) == OVERHEAD + FILE_TOKENS


def test_a_hostile_page_count_is_only_a_count() -> None:
    """A PDF that claims a billion pages is counted so (the request is then too large for any
    model, as it would be upstream), and counting it parses no page."""
    pdf = pdf_bytes(1).replace(b"/Count 1", b"/Count 1000000000")
    assert pdf_pages(pdf) == 1_000_000_000


@pytest.mark.parametrize(("seconds", "rate"), [(3.0, 16_000), (0.5, 44_100), (61.2, 8_000)])
def test_a_wav_recording_counts_its_seconds(seconds: float, rate: int) -> None:
    tokenizer = tokenizer_for(GPT4O)
    audio = base64.b64encode(wav_bytes(seconds, rate)).decode()
    part = {"type": "input_audio", "input_audio": {"data": audio, "format": "wav"}}
    expected = round(seconds * AUDIO_TOKENS_PER_SECOND)
    assert tokenizer.count_message(with_part(part)) == OVERHEAD + expected


def test_an_mp3_counts_its_length_at_the_common_bit_rate() -> None:
    tokenizer = tokenizer_for(GPT4O)
    audio = base64.b64encode(b"\xff\xfb" + bytes(AUDIO_BYTES_PER_SECOND * 4 - 2)).decode()
    part = {"type": "input_audio", "input_audio": {"data": audio, "format": "mp3"}}
    assert tokenizer.count_message(with_part(part)) == OVERHEAD + 4 * AUDIO_TOKENS_PER_SECOND


@pytest.mark.parametrize("audio", [{"data": "???", "format": "wav"}, "UklGRg==", None])
def test_audio_that_does_not_decode_counts_one_token(audio: object) -> None:
    tokenizer = tokenizer_for(GPT4O)
    part = {"type": "input_audio", "input_audio": audio}
    assert tokenizer.count_message(with_part(part)) == OVERHEAD + 1


def test_a_wav_whose_header_cannot_be_read_counts_its_size() -> None:
    """Not a WAV after all (or one `wave` does not read): its length from its size, as an
    MP3's."""
    tokenizer = tokenizer_for(GPT4O)
    data = base64.b64encode(bytes(AUDIO_BYTES_PER_SECOND * 3)).decode()
    part = {"type": "input_audio", "input_audio": {"data": data, "format": "wav"}}
    assert tokenizer.count_message(with_part(part)) == OVERHEAD + 3 * AUDIO_TOKENS_PER_SECOND


def test_every_tokenizer_counts_files_the_same_way() -> None:
    """The estimate tokenizer (a model without a known tokenizer) shares the rule."""
    estimate = tokenizer_for(ModelInfo(id="some-local-model", context_window=32_000))
    assert estimate.key == "estimate:chars4"
    part = file_part(file_data=data_url("application/pdf", pdf_bytes(2, padding=50_000)))
    assert estimate.count_message(with_part(part)) == OVERHEAD + 2 * PDF_PAGE_TOKENS


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("data:application/pdf;base64,JVBERg==", ("application/pdf", b"%PDF")),
        ("data:Text/Plain;charset=utf-8;base64,aGk=", ("text/plain", b"hi")),
        ("aGk=", ("", b"hi")),
        ("data:text/plain,hi", None),
        ("https://example.com/a.pdf", None),
        ("", None),
        (None, None),
    ],
)
def test_data_urls(value: object, expected: tuple[str, bytes] | None) -> None:
    assert decoded_data_url(value) == expected


def test_a_pdf_is_read_once_per_tenant(monkeypatch: pytest.MonkeyPatch) -> None:
    """An ask counts its question twice (to choose the window, then to store it): pypdf reads
    the file once. The count is kept per tenant, as a text's is: another tenant's ask reads it
    again (a quicker count would tell it the file was sent before)."""
    read: list[int] = []

    def reading(data: bytes) -> int | None:
        read.append(len(data))
        return pdf_pages(data)

    monkeypatch.setattr(_media, "pdf_pages", reading)
    tokenizer = tokenizer_for(GPT4O)
    message = with_part(file_part(file_data=data_url("application/pdf", pdf_bytes(2))))
    with counting_for("tenant-a"):
        counts = {tokenizer.count_message(message) for _ in range(3)}
    with counting_for("tenant-b"):
        counts.add(tokenizer.count_message(message))
    assert counts == {OVERHEAD + 2 * PDF_PAGE_TOKENS}
    assert len(read) == 2
