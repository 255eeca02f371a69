"""Files between the three APIs (workingmem.formats.files and the formats that use it): what a
model of another API receives for a file a client attached."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.helpers import data_url, pdf_bytes
from workingmem.formats import anthropic, responses
from workingmem.formats.files import (
    chat_part_of_document,
    chat_part_of_input_file,
    document_of_chat_part,
    input_file_of_chat_part,
)

PDF = pdf_bytes(2)
PDF_B64 = base64.b64encode(PDF).decode()
PDF_URL = f"data:application/pdf;base64,{PDF_B64}"


def pdf_document(**more: Any) -> dict[str, Any]:
    source = {"type": "base64", "media_type": "application/pdf", "data": PDF_B64}
    return {"type": "document", "source": source, **more}


# -- Anthropic documents -> chat ----------------------------------------------------------------


def test_a_pdf_document_is_a_chat_file_with_the_same_bytes() -> None:
    assert chat_part_of_document(pdf_document(title="Q3 report")) == [
        {"type": "file", "file": {"filename": "Q3 report", "file_data": PDF_URL}}
    ]
    untitled = chat_part_of_document(pdf_document())
    assert untitled[0]["file"]["filename"] == "document.pdf"  # OpenAI asks for a name


def test_a_text_document_is_its_text() -> None:
    source = {"type": "text", "media_type": "text/plain", "data": "Budget: 4,000 euros."}
    block = {"type": "document", "source": source, "title": "Notes"}
    assert chat_part_of_document(block) == [
        {"type": "text", "text": "Notes\n\nBudget: 4,000 euros."}
    ]


def test_a_content_document_is_its_texts_and_images() -> None:
    content = [
        {"type": "text", "text": "Page one."},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}},
        {"type": "text", "text": "Page two."},
    ]
    block = {"type": "document", "source": {"type": "content", "content": content}}
    assert chat_part_of_document(block) == [
        {"type": "text", "text": "Page one.\n\nPage two."},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
    ]


@pytest.mark.parametrize(
    ("source", "line"),
    [
        (
            {"type": "url", "url": "https://example.com/a.pdf"},
            "[document: https://example.com/a.pdf]",
        ),
        ({"type": "file", "file_id": "file_011"}, "[document: file_011]"),
    ],
)
def test_a_document_a_chat_model_cannot_open_is_named(source: dict[str, str], line: str) -> None:
    assert chat_part_of_document({"type": "document", "source": source}) == [
        {"type": "text", "text": line}
    ]


def test_a_claude_message_with_a_pdf_shows_the_pdf_to_a_chat_model() -> None:
    """The chat view of a stored Anthropic user message (what a chat upstream reads, and what
    is counted): the PDF as a file part, beside the words."""
    content = [pdf_document(title="report.pdf"), {"type": "text", "text": "Summarize it."}]
    (turn,) = anthropic.turns_of([{"role": "user", "content": content}])
    assert turn.message == {
        "role": "user",
        "content": [
            {"type": "file", "file": {"filename": "report.pdf", "file_data": PDF_URL}},
            {"type": "text", "text": "Summarize it."},
        ],
    }


# -- Responses files -> chat --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("part", "expected"),
    [
        (
            {"type": "input_file", "file_data": PDF_URL, "filename": "a.pdf"},
            {"type": "file", "file": {"filename": "a.pdf", "file_data": PDF_URL}},
        ),
        (
            {"type": "input_file", "file_id": "file-abc"},
            {"type": "file", "file": {"file_id": "file-abc"}},
        ),
        (
            {"type": "input_file", "file_url": "https://example.com/a.pdf"},
            {"type": "text", "text": "[file: https://example.com/a.pdf]"},
        ),
    ],
)
def test_a_responses_file_as_a_chat_part(part: dict[str, Any], expected: dict[str, Any]) -> None:
    assert chat_part_of_input_file(part) == expected


def test_a_responses_message_with_a_file_shows_it_to_a_chat_model() -> None:
    content = [
        {"type": "input_text", "text": "Summarize it."},
        {"type": "input_file", "file_data": PDF_URL, "filename": "a.pdf"},
    ]
    (turn,) = responses.turns_of([{"role": "user", "content": content}])
    assert turn.message["content"][1] == {
        "type": "file",
        "file": {"filename": "a.pdf", "file_data": PDF_URL},
    }


def test_a_responses_image_by_file_id_is_named_for_a_chat_model() -> None:
    """Chat takes an image by URL only: one by file id is a line naming it, where it was
    left out of the chat view (not counted, and unknown to a chat model)."""
    content = [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "file_id": "file-img1", "detail": "auto"},
    ]
    (turn,) = responses.turns_of([{"role": "user", "content": content}])
    assert turn.message["content"] == "What is this?\n[image: file-img1]"


# -- chat files -> Anthropic and Responses ------------------------------------------------------


def test_a_chat_pdf_is_a_claude_document() -> None:
    part = {"type": "file", "file": {"filename": "a.pdf", "file_data": PDF_URL}}
    assert document_of_chat_part(part) == {**pdf_document(), "title": "a.pdf"}


def test_a_chat_text_file_is_a_claude_text_document() -> None:
    part = {"type": "file", "file": {"file_data": data_url("text/markdown", b"# Plan")}}
    assert document_of_chat_part(part) == {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "# Plan"},
    }


@pytest.mark.parametrize(
    ("part", "line"),
    [
        ({"type": "file", "file": {"file_id": "file-abc"}}, "[file: file-abc]"),
        (
            {
                "type": "file",
                "file": {"filename": "a.zip", "file_data": data_url("application/zip", b"PK")},
            },
            "[file: a.zip]",
        ),
        ({"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}}, "[audio: wav]"),
    ],
)
def test_what_claude_cannot_take_is_named(part: dict[str, Any], line: str) -> None:
    assert document_of_chat_part(part) == {"type": "text", "text": line}


def test_a_chat_message_with_a_pdf_reaches_claude_as_a_document() -> None:
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "Summarize it."},
            {"type": "file", "file": {"filename": "a.pdf", "file_data": PDF_URL}},
        ],
    }
    assert anthropic.message_of(message)["content"] == [
        {"type": "text", "text": "Summarize it."},
        {**pdf_document(), "title": "a.pdf"},
    ]


def test_a_chat_message_with_a_file_reaches_responses_as_an_input_file() -> None:
    message = {
        "role": "user",
        "content": [
            {"type": "file", "file": {"filename": "a.pdf", "file_data": PDF_URL}},
            {"type": "input_audio", "input_audio": {"data": "UklG", "format": "mp3"}},
        ],
    }
    (item,) = responses.items_of_message(message)
    assert item["content"] == [
        {"type": "input_file", "file_data": PDF_URL, "filename": "a.pdf"},
        {"type": "input_text", "text": "[audio: mp3]"},
    ]
    assert input_file_of_chat_part({"type": "file", "file": {"file_id": "file-abc"}}) == {
        "type": "input_file",
        "file_id": "file-abc",
    }


def test_a_claude_pdf_reaches_a_responses_model_as_an_input_file() -> None:
    """Across the chat view: an Anthropic turn sent to a Responses upstream."""
    (turn,) = anthropic.turns_of([{"role": "user", "content": [pdf_document(title="r.pdf")]}])
    (item,) = responses.items_of_message(turn.message)
    assert item["content"] == [{"type": "input_file", "file_data": PDF_URL, "filename": "r.pdf"}]


def test_a_responses_pdf_reaches_claude_as_a_document() -> None:
    """Across the chat view: a Responses turn sent to an Anthropic upstream."""
    part = {"type": "input_file", "file_data": PDF_URL, "filename": "r.pdf"}
    (turn,) = responses.turns_of([{"role": "user", "content": [part]}])
    assert anthropic.message_of(turn.message)["content"] == [{**pdf_document(), "title": "r.pdf"}]
