"""Responses input items as chat turns and back: units whole, originals kept as given."""

from __future__ import annotations

from typing import Any

import pytest

import workingmem as wm
from workingmem.formats.responses import FORMAT, items_of, items_of_message, turns_of
from workingmem.messages import normalize_messages
from workingmem.types import Turn


def stored(native: wm.NativeItem, seq: int = 1) -> Turn:
    """The turn a store gives back for `native`."""
    return Turn.from_message(native.message, seq=seq, format=native.format, item=native.item)


def test_a_responses_run_of_items_is_one_assistant_turn_with_its_client_calls() -> None:
    items: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "input_text", "text": "weather in Lyon?"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Checking."}],
        },
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "weather",
            "arguments": '{"city":"Lyon"}',
        },
        {"type": "computer_call", "call_id": "c2", "action": {"type": "screenshot"}},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        {
            "type": "computer_call_output",
            "call_id": "c2",
            "output": [{"type": "input_text", "text": "shot"}],
        },
    ]
    turns = turns_of(items)
    assert [t.message["role"] for t in turns] == ["user", "assistant", "tool", "tool"]
    answer = turns[1].message
    assert answer["content"] == "Checking."
    calls = answer.get("tool_calls") or []
    assert [c["id"] for c in calls] == ["c1", "c2"]
    assert calls[1]["function"]["name"] == "computer_call"
    assert turns[3].message["content"] == "shot"
    assert all(t.format == FORMAT for t in turns)
    assert [i for t in turns for i in items_of(stored(t))] == items  # every item, as given


def test_two_items_of_one_call_are_stored_and_their_call_viewed_once() -> None:
    """No response has them, a hand-made history may (schemathesis made one): stored as
    given, not refused for a chat view with one call id twice."""
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {"type": "custom_tool_call", "call_id": "c1", "name": "shell", "input": "ls"},
        {"type": "other_call", "call_id": "c1", "status": "completed"},
        {"type": "function_call_output", "call_id": "c1", "output": "a.txt"},
    ]
    turns = turns_of(items)
    calls = turns[1].message.get("tool_calls") or []
    assert [(c["id"], c["function"]["name"]) for c in calls] == [("c1", "shell")]
    assert turns[2].message["role"] == "tool"
    assert normalize_messages([t.message for t in turns])  # a valid chat history
    assert [i for t in turns for i in items_of(stored(t))] == items


def test_an_output_answers_the_open_calls_given_and_no_call_after_a_user_turn() -> None:
    output = {"type": "function_call_output", "call_id": "c9", "output": "late"}
    assert turns_of([output], open_calls={"c9"})[0].message["role"] == "tool"
    after_user = turns_of([{"role": "user", "content": "hi"}, output], open_calls={"c9"})
    assert after_user[1].message == {
        "role": "user",
        "content": '{"type":"function_call_output","call_id":"c9","output":"late"}',
    }


def test_user_side_items_keep_images_files_and_system_text_in_their_view() -> None:
    image = "data:image/png;base64,AAAA"
    items: list[dict[str, Any]] = [
        {"role": "developer", "content": "be brief"},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "look"},
                {"type": "input_image", "image_url": image},
                {"type": "input_file", "filename": "a.pdf"},
            ],
        },
        {"type": "mcp_approval_response", "approval_request_id": "r1", "approve": True},
    ]
    views = [t.message for t in turns_of(items)]
    assert views[0] == {"role": "user", "content": "be brief"}
    assert views[1]["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": image}},
        {"type": "text", "text": "[file: a.pdf]"},
    ]
    assert views[2]["role"] == "user"


def test_an_answer_of_only_reasoning_is_an_empty_assistant_turn() -> None:
    [turn] = turns_of([{"type": "reasoning", "id": "rs", "summary": []}])
    assert turn.message == {"role": "assistant", "content": ""}


def test_turns_written_as_chat_messages_read_back_as_the_items_that_say_the_same() -> None:
    chat = [
        Turn.from_message({"role": "user", "content": "hi"}),
        Turn.from_message(
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "see"},
                    {"type": "image_url", "image_url": {"url": "u"}},
                ],
            }
        ),
        Turn.from_message(
            {
                "role": "assistant",
                "content": "calling",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            }
        ),
        Turn.from_message({"role": "tool", "tool_call_id": "c1", "content": "done"}),
        Turn.from_message({"role": "assistant", "content": "ok"}),
    ]
    items = [i for t in chat for i in items_of(t)]
    assert items == [
        {"role": "user", "content": "hi"},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "see"},
                {"type": "input_image", "image_url": "u", "detail": "auto"},
            ],
        },
        {"role": "assistant", "content": "calling"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "done"},
        {"role": "assistant", "content": "ok"},
    ]
    assert [t.message for t in turns_of(items)][2:4] == [m.to_message() for m in chat[2:4]]


@pytest.mark.parametrize(
    ("items", "field"),
    [
        ("not a list", "items"),
        ([{"role": "user", "content": "ok"}, 7], "items[1]"),
        ([{"type": 3}], "items.type"),
    ],
)
def test_what_is_not_a_list_of_items_is_refused_with_its_place(items: Any, field: str) -> None:
    with pytest.raises(wm.ValidationError) as raised:
        turns_of(items)
    assert raised.value.field == field


def test_a_chat_parts_image_detail_and_cache_mark_reach_its_responses_part() -> None:
    """What both APIs say the same way is kept on the way: an image's detail (``original``
    included) and a part's ``prompt_cache_breakpoint``."""
    mark = {"mode": "explicit", "ttl": "30m"}
    image = {"url": "https://example.com/a.png", "detail": "original"}
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is this?", "prompt_cache_breakpoint": mark},
            {"type": "image_url", "image_url": image, "prompt_cache_breakpoint": mark},
            {"type": "text", "text": "Unmarked."},
        ],
    }
    (item,) = items_of_message(message)
    assert item["content"] == [
        {"type": "input_text", "text": "What is this?", "prompt_cache_breakpoint": mark},
        {
            "type": "input_image",
            "image_url": "https://example.com/a.png",
            "detail": "original",
            "prompt_cache_breakpoint": mark,
        },
        {"type": "input_text", "text": "Unmarked."},
    ]
