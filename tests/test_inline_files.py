"""A request's inline files under the size an upstream takes (workingmem._inline_files): the
newest kept while they fit, an older message's files named, the question's always sent."""

from __future__ import annotations

from typing import Any

import pytest

import workingmem as wm
from workingmem._inline_files import inline_bytes, within_file_bytes
from workingmem.formats import ORIGINAL_KEY


def pdf(name: str, size: int) -> dict[str, Any]:
    data = "data:application/pdf;base64," + "A" * (size - len("data:application/pdf;base64,"))
    return {"type": "file", "file": {"filename": name, "file_data": data}}


def asking(*parts: dict[str, Any], original: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "user",
        "content": [{"type": "text", "text": "See."}, *parts],
    }
    return {**message, ORIGINAL_KEY: original} if original else message


@pytest.mark.parametrize(
    ("part", "size"),
    [
        (pdf("a.pdf", 1_000), 1_000),
        ({"type": "file", "file": {"file_id": "file-abc"}}, 0),
        ({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}, 26),
        ({"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}, 0),
        ({"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}, 8),
        ({"type": "text", "text": "x" * 5_000}, 0),
        ({"type": "file"}, 0),
    ],
)
def test_what_a_part_carries_inline(part: dict[str, Any], size: int) -> None:
    assert inline_bytes(part) == size


def test_older_files_are_named_once_the_newer_ones_fill_the_limit() -> None:
    system = {"role": "system", "content": "You help."}
    oldest = asking(pdf("q1.pdf", 400), original={"role": "user", "content": ["the blocks"]})
    older = asking(pdf("q2.pdf", 400))
    answer = {"role": "assistant", "content": "Read."}
    newest = asking(pdf("q3.pdf", 400))
    sent = within_file_bytes([system, oldest, answer, older, answer, newest], limit=900)
    assert sent[2:] == [answer, older, answer, newest]
    assert sent[0] == system
    assert sent[1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "See."},
            {"type": "text", "text": "[file: q1.pdf, attached earlier]"},
        ],
    }  # its original (the same file, for a native upstream) is not sent either


def test_the_questions_own_files_go_whatever_their_size() -> None:
    question = asking(pdf("big.pdf", 5_000))
    earlier = asking(pdf("small.pdf", 10))
    assert within_file_bytes([earlier, question], limit=1_000) == [
        {
            **earlier,
            "content": [
                {"type": "text", "text": "See."},
                {"type": "text", "text": "[file: small.pdf, attached earlier]"},
            ],
        },
        question,
    ]


def test_a_request_under_the_limit_is_sent_as_it_is() -> None:
    messages = [asking(pdf("a.pdf", 300), original={"k": "v"}), asking(pdf("b.pdf", 300))]
    assert within_file_bytes(messages, limit=600) == messages


def test_the_limit_is_the_gateways_setting() -> None:
    assert wm.GatewayConfig().max_inline_file_bytes == 24 * 2**20
    with pytest.raises(wm.ValidationError, match="max_inline_file_bytes"):
        wm.GatewayConfig(max_inline_file_bytes=0)
