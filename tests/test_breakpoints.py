"""`newest_marks`: the client's cache marks in what is sent, the newest an upstream takes."""

from __future__ import annotations

from typing import Any

from workingmem.formats.breakpoints import BREAKPOINT, OPENAI_BREAKPOINTS, newest_marks

MARK = {"mode": "explicit"}


def text(value: str, mark: bool = True) -> dict[str, Any]:
    return {"type": "text", "text": value, **({BREAKPOINT: MARK} if mark else {})}


def test_a_request_within_the_limit_is_sent_as_it_is() -> None:
    messages: Any = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [text("a"), text("b", mark=False)]},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [text("c"), text("d"), text("e")]},
    ]
    assert newest_marks(messages) is messages


def test_older_marks_are_left_out_and_the_stored_messages_keep_theirs() -> None:
    older: Any = {"role": "user", "content": [text("a"), text("b")]}
    newer: Any = {"role": "user", "content": [text("c"), text("d", mark=False), text("e")]}
    messages: Any = [older, {"role": "assistant", "content": "ok"}, newer]
    sent = newest_marks(messages, limit=3)
    assert [
        BREAKPOINT in part for m in sent if isinstance(m["content"], list) for part in m["content"]
    ] == [
        False,
        True,
        True,
        False,
        True,
    ]
    assert [part["text"] for part in sent[0]["content"]] == ["a", "b"]
    assert BREAKPOINT in older["content"][0]  # what was given is not changed


def test_openai_keeps_the_marks_it_matches_at_and_claude_four() -> None:
    """OpenAI matches its cache at the newest 80 marks of a conversation (it writes four of a
    request and takes the rest); Anthropic refuses more than four: the default is OpenAI's,
    a Claude request names its mark and its limit."""
    window: Any = [
        {"role": "user", "content": [text(str(n))]} for n in range(OPENAI_BREAKPOINTS + 2)
    ]
    sent = newest_marks(window)
    assert [BREAKPOINT in m["content"][0] for m in sent] == [False, False] + [True] * 80
    claude: Any = [
        {"role": "user", "content": [{"type": "text", "text": str(n), "cache_control": {}}]}
        for n in range(6)
    ]
    kept = newest_marks(claude, limit=4, key="cache_control")
    assert ["cache_control" in m["content"][0] for m in kept] == [False, False] + [True] * 4
