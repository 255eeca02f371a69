"""Where a request's turns go (`continuation`, R26-R27): extend, edit, regenerate, or new."""

from __future__ import annotations

from typing import Any

from workingmem.messages import Continuation, continuation, overlap


def u(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def a(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


THREAD = [u("1"), a("2"), u("3"), a("4")]


def test_a_request_that_extends_the_thread_is_new_turns_after_it() -> None:
    assert overlap(THREAD, [*THREAD, u("5")]) == 4
    assert overlap(THREAD, [u("5")]) == 0


def test_an_edit_replaces_the_thread_from_the_edited_turn() -> None:
    assert continuation(THREAD, [u("1"), a("2"), u("3, edited")]) == Continuation(2, 2)


def test_a_regenerate_replaces_the_last_answer() -> None:
    assert continuation(THREAD, [u("1"), a("2"), u("3")]) == Continuation(3, 3)
    assert continuation(THREAD[:2], [u("1")]) == Continuation(1, 1)  # one exchange


def test_one_message_never_rewinds_a_longer_thread() -> None:
    """A client that sends only its new message may say again what it said first."""
    assert continuation(THREAD, [u("1")]) == Continuation(None, 0)


def test_a_request_that_starts_elsewhere_is_all_new() -> None:
    assert continuation(THREAD, [u("other"), a("x"), u("y")]) == Continuation(None, 0)


def test_turns_compare_by_what_they_say() -> None:
    """Text parts read as their text; tool-call arguments as JSON values."""
    parts = {"role": "user", "content": [{"type": "text", "text": "1"}]}
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
    spaced = {**call, "function": {"name": "f", "arguments": '{"a": 1}'}}
    stored = [u("1"), {"role": "assistant", "content": None, "tool_calls": [call]}]
    resent = [parts, {"role": "assistant", "content": "", "tool_calls": [spaced]}, u("next")]
    assert overlap(stored, resent) == 2
