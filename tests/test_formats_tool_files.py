"""Files a tool returned (a screenshot, a PDF it read), in every format: a thread's tool turn
carries them as chat parts, each API gets them as its own tool result's blocks or parts, and a
chat upstream, which takes only text in a tool result, gets them after the results."""

from __future__ import annotations

from typing import Any

import pytest

import workingmem as wm
from workingmem.formats import anthropic, responses
from workingmem.formats.tool_files import lifted
from workingmem.messages import normalize_messages
from workingmem.types import MessageIn

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAHnOcQ"
"""A PNG's first bytes, as base64."""
PNG_URL = f"data:image/png;base64,{PNG}"
PDF = "JVBERi0xLjQK"
PDF_URL = f"data:application/pdf;base64,{PDF}"
IMAGE_PART = {"type": "image_url", "image_url": {"url": PNG_URL}}
PDF_PART = {
    "type": "file",
    "file": {"filename": "spec.pdf", "file_data": PDF_URL},
}
CALL = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "t1", "name": "shot", "input": {}}],
}


def claude_result(content: Any, **extra: Any) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": "t1", "content": content, **extra}
    return {"role": "user", "content": [block]}


def test_a_claude_tool_result_keeps_its_image_and_document_as_parts_of_its_tool_turn() -> None:
    result = claude_result(
        [
            {"type": "text", "text": "Captured."},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            {
                "type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
                "title": "spec.pdf",
            },
            {"type": "search_result", "source": "s", "title": "t", "content": []},
        ]
    )
    turns = anthropic.turns_of([CALL, result])
    assert turns[1].message == {
        "role": "tool",
        "tool_call_id": "t1",
        "content": [
            {"type": "text", "text": "Captured."},
            IMAGE_PART,
            PDF_PART,
            {"type": "text", "text": "[search_result]"},
        ],
    }
    normalize_messages([turns[0].message, turns[1].message])  # a valid tool turn
    # the view says the same to Claude again: its blocks, the image and the PDF as given
    again = anthropic.message_of(turns[1].message)["content"][0]["content"]
    assert [block["type"] for block in again] == ["text", "image", "document", "text"]
    assert again[1]["source"]["data"] == PNG
    assert again[2]["source"]["data"] == PDF


def test_a_text_result_is_viewed_as_before_and_a_failed_one_with_files_says_so_first() -> None:
    texts = claude_result([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
    assert anthropic.turns_of([CALL, texts])[1].message["content"] == "a\nb"
    failed = claude_result("boom", is_error=True)
    assert anthropic.turns_of([CALL, failed])[1].message["content"] == "Error: boom"
    image = {"type": "image", "source": {"type": "url", "url": "https://example.org/a.png"}}
    failed_shot = claude_result([image], is_error=True)
    assert anthropic.turns_of([CALL, failed_shot])[1].message["content"] == [
        {"type": "text", "text": "Error:"},
        {"type": "image_url", "image_url": {"url": "https://example.org/a.png"}},
    ]


def test_a_responses_output_keeps_its_image_and_file_and_reads_back_as_its_items() -> None:
    output = [
        {"type": "input_text", "text": "Captured."},
        {"type": "input_image", "image_url": PNG_URL, "detail": "auto"},
        {"type": "input_image", "file_id": "file-1"},
        {"type": "input_file", "filename": "spec.pdf", "file_data": PDF_URL},
    ]
    call = {"type": "function_call", "call_id": "c1", "name": "shot", "arguments": "{}"}
    out = {"type": "function_call_output", "call_id": "c1", "output": output}
    turns = responses.turns_of([call, out])
    assert turns[1].message == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": [
            {"type": "text", "text": "Captured."},
            IMAGE_PART,
            {"type": "text", "text": "[image: file-1]"},
            PDF_PART,
        ],
    }
    # a chat view of a result with files, as Responses items: an output of parts
    (item,) = responses.items_of_message(
        anthropic.turns_of(
            [
                CALL,
                claude_result(
                    [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                        }
                    ]
                ),
            ]
        )[1].message
    )
    assert item == {
        "type": "function_call_output",
        "call_id": "t1",
        "output": [{"type": "input_image", "image_url": PNG_URL, "detail": "auto"}],
    }
    text_only = {
        "type": "function_call_output",
        "call_id": "c1",
        "output": [{"type": "input_text", "text": "ok"}],
    }
    assert responses.turns_of([call, text_only])[1].message["content"] == "ok"


def test_a_chat_upstream_gets_the_results_text_and_their_files_after_the_run() -> None:
    messages: list[MessageIn] = [
        {"role": "user", "content": "Look at both pages."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "shot", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "read", "arguments": "{}"}},
                {"id": "c", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "a",
            "content": [{"type": "text", "text": "Shot."}, IMAGE_PART],
        },
        {"role": "tool", "tool_call_id": "b", "content": [PDF_PART]},
        {"role": "tool", "tool_call_id": "c", "content": "a.txt"},
        {"role": "user", "content": "What do they say?"},
    ]
    sent = list(lifted(messages))
    assert [m["role"] for m in sent] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "tool",
        "user",
        "user",
    ]
    assert sent[2] == {"role": "tool", "tool_call_id": "a", "content": "Shot.\n[image]"}
    assert sent[3] == {"role": "tool", "tool_call_id": "b", "content": "[file: spec.pdf]"}
    assert sent[4] is messages[4]
    assert sent[5] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Attached to the result of call a:"},
            IMAGE_PART,
            {"type": "text", "text": "Attached to the result of call b:"},
            PDF_PART,
        ],
    }
    ending = list(lifted(messages[:4]))  # the results end the request: the files still follow
    assert ending[-1]["role"] == "user"
    plain = [*messages[:2], {"role": "tool", "tool_call_id": "a", "content": "Shot."}]
    assert lifted(plain) is plain  # nothing to move: the request as it came


def test_a_tool_turn_takes_images_and_files_but_no_recording() -> None:
    audio = {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}
    call = {
        "role": "assistant",
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    normalize_messages(
        [call, {"role": "tool", "tool_call_id": "a", "content": [IMAGE_PART, PDF_PART]}]
    )
    with pytest.raises(wm.ValidationError) as refused:
        normalize_messages([call, {"role": "tool", "tool_call_id": "a", "content": [audio]}])
    assert refused.value.field == "messages[1].content[0].type"
