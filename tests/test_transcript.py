"""Turns as text (workingmem.transcript): what the helper model summarizing a thread, recall and
a text-only model read. An attachment is named where it stands, so that a summary can say that
the user shared report.pdf, where it read "[1 non-text part(s)]"."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

import workingmem as wm
from tests.helpers import data_url, pdf_bytes
from workingmem.llm.local import chat_messages
from workingmem.transcript import label, render_turn, text_of

REPORT = {
    "type": "file",
    "file": {"filename": "report.pdf", "file_data": data_url("application/pdf", pdf_bytes(1))},
}


@pytest.mark.parametrize(
    ("part", "named"),
    [
        (REPORT, "[file: report.pdf]"),
        ({"type": "file", "file": {"file_id": "file-abc"}}, "[file: file-abc]"),
        ({"type": "file", "file": {}}, "[file]"),
        ({"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}, "[image]"),
        (
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
            "[audio: wav]",
        ),
        ({"type": "input_audio", "input_audio": {"data": "UklGRg=="}}, "[audio]"),
        ({"type": "refusal", "refusal": "I can't help with that."}, "I can't help with that."),
        ({"type": "video_url"}, "[video_url]"),
    ],
)
def test_a_part_is_named_as_a_reader_of_the_text_sees_it(part: dict[str, Any], named: str) -> None:
    assert label(part) == named


def test_parts_are_named_where_they_stand() -> None:
    content = [
        {"type": "text", "text": "Here is the Q3 report:"},
        REPORT,
        {"type": "text", "text": "What is the total?"},
    ]
    assert text_of(content) == "Here is the Q3 report: [file: report.pdf] What is the total?"
    assert text_of("plain") == "plain"
    assert text_of(None) == ""


def test_a_summarys_transcript_says_which_file_was_shared() -> None:
    """The lines the summary's helper model reads carry the file's name, never its bytes."""
    turn = wm.Turn(
        role="user",
        content=[{"type": "text", "text": "Check this."}, REPORT],
        seq=4,
        created_at=datetime(2026, 5, 8, 13, 56, tzinfo=UTC),
    )
    assert render_turn(turn) == "[4] (8 May 2026, 13:56) user: Check this. [file: report.pdf]"


def test_the_local_model_is_told_what_was_attached() -> None:
    """A text-only model reads the name of what it cannot see, each part on its line."""
    (message,) = chat_messages(
        [{"role": "user", "content": [{"type": "text", "text": "Check this."}, REPORT]}]
    )
    assert message == {"role": "user", "content": "Check this.\n[file: report.pdf]"}
