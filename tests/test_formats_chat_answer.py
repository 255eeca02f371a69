"""`formats.chat_answer`: which fields of a chat answer are its upstream's own, and the turn
stored for it."""

from __future__ import annotations

from typing import Any

from workingmem import CHAT_FORMAT, NativeItem
from workingmem.formats.chat_answer import (
    answer_item,
    call_fields,
    chat_original,
    own_fields,
    with_chat_original,
)
from workingmem.types import CHAT_ORIGINAL_KEY, Message, Turn

CALL: Any = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


def test_openai_s_own_message_fields_are_no_upstream_s() -> None:
    answer: dict[str, Any] = {
        "role": "assistant",
        "content": "Hi",
        "refusal": None,
        "annotations": [],
        "audio": None,
        "function_call": None,
        "tool_calls": [{**CALL, "index": 0}],
        "reasoning_content": "",  # said nothing
    }
    assert own_fields(answer) == {}
    assert call_fields(answer["tool_calls"][0]) == {}
    message: Message = {"role": "assistant", "content": "Hi"}
    assert answer_item(message, own_fields(answer) or None) is message


def test_an_upstream_s_fields_are_kept_in_an_item_beside_the_view() -> None:
    signed = {**CALL, "extra_content": {"google": {"thought_signature": "s"}}}
    message: Message = {"role": "assistant", "content": None, "tool_calls": [signed]}
    turn = answer_item(message, {"reasoning_content": "Because."})
    assert isinstance(turn, NativeItem)
    assert turn.format == CHAT_FORMAT
    assert turn.item == {**message, "reasoning_content": "Because."}
    assert turn.message == {"role": "assistant", "content": None, "tool_calls": [CALL]}


def test_a_call_s_own_field_alone_makes_an_item() -> None:
    signed = {**CALL, "extra_content": {"google": {"thought_signature": "s"}}}
    turn = answer_item({"role": "assistant", "content": None, "tool_calls": [signed]}, None)
    assert isinstance(turn, NativeItem)
    assert turn.item["tool_calls"] == [signed]


def test_an_item_of_another_format_carries_the_chat_answer_first_and_hides_it() -> None:
    blocks = NativeItem(
        "anthropic.messages",
        {"role": "assistant", "content": [{"type": "text", "text": "Hi"}]},
        {"role": "assistant", "content": "Hi"},
    )
    message: Message = {"role": "assistant", "content": "Hi"}
    carried = with_chat_original(blocks, message, {"reasoning_content": "Because."})
    assert isinstance(carried, NativeItem)
    assert list(carried.item) == [CHAT_ORIGINAL_KEY, "role", "content"]  # first: found by SQL
    turn = Turn.from_message(carried.message, seq=2, format=carried.format, item=carried.item)
    assert chat_original(turn) == {**message, "reasoning_content": "Because."}
    assert turn.in_format("anthropic.messages") == blocks.item  # as the client gave it
    assert with_chat_original(blocks, message, None) is blocks  # nothing to carry


def test_a_chat_message_becomes_the_chat_item_and_a_plain_turn_has_no_original() -> None:
    message: Message = {"role": "assistant", "content": "Hi"}
    carried = with_chat_original(message, message, {"reasoning": "Because."})
    assert isinstance(carried, NativeItem)
    assert carried.format == CHAT_FORMAT
    assert chat_original(Turn.from_message(message, seq=1)) is None
