"""Anthropic Messages as chat turns and back: tool_use and its tool_results one unit, thinking
and its signature kept, every message as given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import workingmem as wm
from workingmem.formats.anthropic import (
    ERROR_TYPES,
    FORMAT,
    blocks_of,
    error_status,
    error_type,
    messages_of,
    turns_of,
)
from workingmem.types import Turn

THINKING = {"type": "thinking", "thinking": "Two cities: call twice.", "signature": "c2lnbmVk"}
TRANSCRIPT: list[dict[str, Any]] = [
    {"role": "user", "content": "Weather in Lyon and Paris?"},
    {
        "role": "assistant",
        "content": [
            THINKING,
            {"type": "text", "text": "Checking both."},
            {"type": "tool_use", "id": "toolu_a", "name": "weather", "input": {"city": "Lyon"}},
            {"type": "tool_use", "id": "toolu_b", "name": "weather", "input": {"city": "Paris"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_a", "content": "sunny"},
            {
                "type": "tool_result",
                "tool_use_id": "toolu_b",
                "content": [{"type": "text", "text": "rain"}],
                "is_error": False,
            },
            {"type": "text", "text": "And tomorrow?"},
        ],
    },
    {"role": "assistant", "content": [{"type": "redacted_thinking", "data": "b3BhcXVl"}]},
]


def stored(native: wm.NativeItem, seq: int) -> Turn:
    return Turn.from_message(native.message, seq=seq, format=native.format, item=native.item)


def test_a_transcript_is_turns_whose_units_are_whole() -> None:
    turns = turns_of(TRANSCRIPT)
    assert [t.message["role"] for t in turns] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
        "assistant",
    ]
    answer = turns[1].message
    assert answer["content"] == "Checking both."
    calls = answer.get("tool_calls") or []
    assert [(c["id"], c["function"]["arguments"]) for c in calls] == [
        ("toolu_a", '{"city":"Lyon"}'),
        ("toolu_b", '{"city":"Paris"}'),
    ]
    assert turns[2].message == {"role": "tool", "tool_call_id": "toolu_a", "content": "sunny"}
    assert turns[3].message["content"] == "rain"
    assert turns[4].message == {"role": "user", "content": "And tomorrow?"}
    assert all(t.format == FORMAT for t in turns)
    back = messages_of([stored(t, seq) for seq, t in enumerate(turns, start=1)])
    assert back == TRANSCRIPT  # every block as given: the thinking's signature too


async def test_a_transcript_round_trips_through_a_real_store(tmp_path: Path) -> None:
    async with await wm.open_store(f"sqlite:///{tmp_path / 'memory.db'}") as store:
        await store.append(tenant_id="t", thread_id="th", messages=turns_of(TRANSCRIPT))
        again = await store.list_turns(tenant_id="t", thread_id="th")
    assert messages_of(again) == TRANSCRIPT


def test_turns_written_in_the_chat_format_come_back_as_blocks() -> None:
    chat: list[wm.Message] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_working_memory", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "# Profile"},
        {"role": "assistant", "content": "Noted."},
    ]
    turns = [Turn.from_message(m, seq=n) for n, m in enumerate(chat, start=1)]
    assert messages_of(turns) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "c1", "name": "get_working_memory", "input": {}}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "# Profile"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Noted."}]},
    ]


def test_a_failed_tool_result_says_so_and_images_are_parts() -> None:
    turns = turns_of(
        [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": "boom",
                        "is_error": True,
                    },
                    {
                        "type": "image",
                        "source": {"type": "url", "url": "https://example.org/a.png"},
                    },
                ],
            },
        ]
    )
    assert turns[1].message["content"] == "Error: boom"
    assert turns[2].message == {
        "role": "user",
        "content": [{"type": "image_url", "image_url": {"url": "https://example.org/a.png"}}],
    }
    assert blocks_of("hi") == [{"type": "text", "text": "hi"}]
    assert blocks_of("") == []


@pytest.mark.parametrize(
    ("content", "view"),
    [
        (
            ["WebFetch", "NotebookEdit"],
            "Tools found, callable from now on: WebFetch, NotebookEdit.",
        ),
        (["loading:", "Cron", "!"], "loading:\nTools found, callable from now on: Cron.\n!"),
    ],
)
def test_the_tools_a_tool_search_loads_are_named_in_the_view(content: Any, view: str) -> None:
    """Claude Code's ToolSearch answers with ``tool_reference`` blocks, which a model offered
    the tools as chat functions reads as the names it may call now, said once."""
    blocks = [
        {"type": "text", "text": part}
        if not part[0].isupper()
        else {"type": "tool_reference", "tool_name": part}
        for part in content
    ]
    call = {"type": "tool_use", "id": "t1", "name": "ToolSearch", "input": {"query": "select:x"}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": blocks}
    turns = turns_of(
        [{"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]
    )
    assert turns[1].message == {"role": "tool", "tool_call_id": "t1", "content": view}


@pytest.mark.parametrize(
    ("messages", "field"),
    [
        ("hi", "messages"),
        ([{"role": "developer", "content": "x"}], "messages[0].role"),
        (["hi"], "messages[0]"),
        ([{"role": "user", "content": [{"text": "no type"}]}], "user.content"),
        ([{"role": "assistant", "content": 3}], "assistant.content"),
    ],
)
def test_what_is_no_anthropic_message_is_refused_by_name(messages: Any, field: str) -> None:
    with pytest.raises(wm.ValidationError) as refused:
        turns_of(messages)
    assert refused.value.field == field


def test_a_system_message_is_no_turn() -> None:
    """Instructions for the call (`workingmem.formats.anthropic_system`): the thread's turns
    are the others, and an error names a message by its place among all of them."""
    asked: Any = [{"role": "user", "content": "Hi."}, {"role": "system", "content": "Be brief."}]
    assert [turn.message["role"] for turn in turns_of(asked)] == ["user"]
    with pytest.raises(wm.ValidationError) as refused:
        turns_of([*asked, {"role": "assistant", "content": 3}])
    assert refused.value.field == "assistant.content"


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        pytest.param(429, "rate_limit_error", id="documented"),
        pytest.param(529, "overloaded_error", id="anthropics-own-status"),
        pytest.param(422, "invalid_request_error", id="another-client-error"),
        pytest.param(503, "api_error", id="another-server-error"),
    ],
)
def test_an_error_status_has_anthropics_type_and_back(status: int, kind: str) -> None:
    """The gateway's errors and the upstream's error events read one table: a documented
    status is its type and the type its status; any other status falls back by its class,
    and a type Anthropic does not document has no status."""
    assert error_type(status) == kind
    assert all(error_status(error_type(s)) == s for s in ERROR_TYPES)
    assert error_status("a_new_error") is None


def test_a_compaction_blocks_summary_is_in_the_view_the_block_kept_as_it_came() -> None:
    compaction = {"type": "compaction", "content": "Ada plans a trip.", "signature": "s"}
    failed = {"type": "compaction", "content": None, "encrypted_content": "e"}
    content = [compaction, failed, {"type": "text", "text": "Sure."}]
    _, said = turns_of(
        [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": content}]
    )
    assert said.item == {"role": "assistant", "content": content}
    assert said.message == {"role": "assistant", "content": "Ada plans a trip.\nSure."}
