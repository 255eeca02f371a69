"""`formats.chat_answer`: which fields of a chat answer are its upstream's own, and the turn
stored for it."""

from __future__ import annotations

from typing import Any

from workingmem import CHAT_FORMAT, NativeItem
from workingmem.formats.chat_answer import answer_item, call_fields, own_fields
from workingmem.types import Message

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
