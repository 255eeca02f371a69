"""`AnthropicClient` against a scripted server speaking Anthropic's Messages API: the chat
request's fields in their Messages places, stored messages sent verbatim, the answer (and its
stream) read back with its thinking, and every failure an `LLMError` with the reason."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.helpers import assert_valid_anthropic_request
from workingmem.embedded import ANTHROPIC_GATEWAY_CONFIG, choose_upstream
from workingmem.formats import ORIGINAL_KEY
from workingmem.llm import (
    AnthropicClient,
    CallKind,
    CallMeta,
    LLMError,
    NativeEvent,
    StreamEnd,
    TextDelta,
)
from workingmem.llm._scripted_anthropic import count_of
from workingmem.llm.anthropic_client import DEFAULT_MAX_TOKENS, HEADERS_OPTION, request_body
from workingmem.llm.testing import (
    Drop,
    RawBody,
    Reply,
    ScriptedUpstream,
    StatusError,
    signature_of,
    tool_call,
)
from workingmem.types import MessageIn

pytestmark = pytest.mark.asyncio

META = CallMeta(tenant_id="t1", kind=CallKind.ANSWER, model="m", thread_id="th1")
THOUGHT = {"type": "thinking", "thinking": "Hmm.", "signature": "sig-kept"}
MESSAGES: list[MessageIn] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi"},
    {
        "role": "assistant",
        "content": "Hello",
        ORIGINAL_KEY: {
            "role": "assistant",
            "content": [THOUGHT, {"type": "text", "text": "Hello"}],
        },
    },
    {"role": "user", "content": "Weather?"},
]
WEATHER = {"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}


@pytest.fixture
async def upstream() -> AsyncIterator[ScriptedUpstream]:
    async with ScriptedUpstream() as server:
        yield server


@pytest.fixture
async def client(upstream: ScriptedUpstream) -> AsyncIterator[AnthropicClient]:
    async with AnthropicClient(
        base_url=upstream.base_url, api_key="sk-ant-test", max_retries=0
    ) as anthropic:
        yield anthropic


async def test_the_chat_request_becomes_a_messages_request(
    client: AnthropicClient, upstream: ScriptedUpstream
) -> None:
    upstream.push(Reply("Sunny.", thinking="Look it up.", prompt_tokens=30, completion_tokens=5))
    completion = await client.complete(
        model="claude-x",
        messages=MESSAGES,
        meta=META,
        max_tokens=50,
        temperature=0.5,
        tools=[WEATHER],
        options={"tool_choice": "required", "stop": "END", "seed": 7, "top_k": 3},
    )
    sent = upstream.requests[-1]
    assert_valid_anthropic_request(sent)
    assert sent["system"] == "Be brief."
    assert sent["messages"][1]["content"] == [THOUGHT, {"type": "text", "text": "Hello"}]
    assert (sent["max_tokens"], sent["temperature"], sent["top_k"]) == (50, 0.5, 3)
    assert sent["tools"] == [{"name": "weather", "input_schema": {"type": "object"}}]
    assert sent["tool_choice"] == {"type": "any"}
    assert sent["stop_sequences"] == ["END"]
    assert "seed" not in sent  # a chat-only field
    assert "sk-ant-test" in str(upstream.headers[-1])  # in the header the SDK sends it in
    assert (completion.text, completion.finish_reason) == ("Sunny.", "stop")
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (30, 5)
    assert completion.raw is not None
    assert completion.raw["content"][0] == {
        "type": "thinking",
        "thinking": "Look it up.",
        "signature": signature_of("Look it up."),
    }


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"tool_choice": "auto"}, {"type": "auto"}),
        ({"tool_choice": "none"}, {"type": "none"}),
        (
            {"tool_choice": {"type": "function", "function": {"name": "f"}}},
            {"type": "tool", "name": "f"},
        ),
        ({"parallel_tool_calls": False}, {"type": "auto", "disable_parallel_tool_use": True}),
        (
            {"tool_choice": {"type": "any"}, "parallel_tool_calls": False},
            {"type": "any", "disable_parallel_tool_use": True},
        ),
        ({"tool_choice": {"type": "tool", "name": "f"}}, {"type": "tool", "name": "f"}),
    ],
)
async def test_tool_choice_in_anthropics_shape(
    options: dict[str, Any], expected: dict[str, Any]
) -> None:
    body, _ = request_body("m", MESSAGES, None, None, None, [WEATHER], options)
    assert body["tool_choice"] == expected


async def test_what_the_chat_request_asks_of_the_answer_in_its_messages_places() -> None:
    schema = {"type": "object", "properties": {"summary": {"type": "string"}}}
    body, headers = request_body(
        "m",
        [{"role": "user", "content": "Summarize."}],
        None,
        0.0,
        {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}},
        None,
        {
            HEADERS_OPTION: {"anthropic-beta": "b1"},
            "service_tier": "flex",
            "max_completion_tokens": 99,
            "thinking": {"type": "enabled", "budget_tokens": 64},
        },
    )
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": schema}}
    assert headers == {"anthropic-beta": "b1"}
    assert "service_tier" not in body  # chat's tiers are not Anthropic's
    assert body["max_tokens"] == 99
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 64}
    bare, _ = request_body("m", [{"role": "user", "content": "x"}], None, None, None, None, None)
    assert bare["max_tokens"] == DEFAULT_MAX_TOKENS  # Anthropic requires a cap


async def test_a_thread_in_chat_turns_is_one_valid_transcript() -> None:
    """Tool results join the user's message after them; an empty answer is left out."""
    body, _ = request_body(
        "m",
        [
            {"role": "user", "content": "Weather in Lyon and Paris?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    tool_call("weather", {"city": "Lyon"}, id="t1"),
                    tool_call("weather", {"city": "Paris"}, id="t2"),
                ],
            },
            {"role": "tool", "tool_call_id": "t1", "content": "sunny"},
            {"role": "tool", "tool_call_id": "t2", "content": "rain"},
            {"role": "assistant", "content": ""},
            {"role": "user", "content": "Thanks."},
        ],
        None,
        None,
        None,
        None,
        None,
    )
    assert_valid_anthropic_request(body)
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    results = body["messages"][2]["content"]
    assert [b["type"] for b in results] == ["tool_result", "tool_result", "text"]


async def test_a_stream_passes_the_thinking_on_and_ends_with_the_whole_message(
    client: AnthropicClient, upstream: ScriptedUpstream
) -> None:
    upstream.push(
        Reply(
            "Calling.",
            thinking="Two calls.",
            tool_calls=[tool_call("weather", {"city": "Lyon"}, id="t1")],
            chunk_chars=4,
        )
    )
    events = [
        event
        async for event in client.stream(model="m", messages=MESSAGES, meta=META, tools=[WEATHER])
    ]
    native = [e.event for e in events if isinstance(e, NativeEvent)]
    assert [e["type"] for e in native] == [
        "content_block_start",
        *["content_block_delta"] * 3,  # "Two ", "call", "s." and the signature
        "content_block_delta",
        "content_block_stop",
    ]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Calling."
    end = events[-1]
    assert isinstance(end, StreamEnd)
    assert end.completion.finish_reason == "tool_calls"
    assert end.completion.tool_calls[0]["function"]["arguments"] == '{"city":"Lyon"}'
    assert end.completion.raw is not None
    assert end.completion.raw["content"] == [
        {"type": "thinking", "thinking": "Two calls.", "signature": signature_of("Two calls.")},
        {"type": "text", "text": "Calling."},
        {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Lyon"}},
    ]


@pytest.mark.parametrize(
    ("status", "retryable"), [(400, False), (401, False), (429, True), (529, True)]
)
async def test_a_refusal_is_an_llm_error_with_anthropics_message(
    client: AnthropicClient, upstream: ScriptedUpstream, status: int, retryable: bool
) -> None:
    upstream.push(StatusError(status, "the reason"))
    with pytest.raises(LLMError) as failed:
        await client.complete(model="m", messages=MESSAGES, meta=META)
    assert failed.value.status_code == status
    assert failed.value.retryable is retryable
    assert "the reason" in str(failed.value)


async def test_what_is_no_answer_is_an_llm_error(
    client: AnthropicClient, upstream: ScriptedUpstream
) -> None:
    upstream.push(RawBody('{"object": "chat.completion"}'))
    with pytest.raises(LLMError, match="no message"):
        await client.complete(model="m", messages=MESSAGES, meta=META)
    upstream.push(Drop())
    with pytest.raises(LLMError, match=r"127\.0\.0\.1") as unreachable:
        await client.complete(model="m", messages=MESSAGES, meta=META)
    assert unreachable.value.retryable


async def test_a_stream_broken_off_is_a_retryable_llm_error(
    client: AnthropicClient, upstream: ScriptedUpstream
) -> None:
    upstream.push(Reply("A long answer in pieces.", chunk_chars=2, drop_after_chunks=5))
    with pytest.raises(LLMError) as broken:
        async for _ in client.stream(model="m", messages=MESSAGES, meta=META):
            pass
    assert broken.value.retryable


async def test_choose_upstream_names_anthropic_and_its_models(upstream: ScriptedUpstream) -> None:
    chosen = choose_upstream(base_url=upstream.base_url, api="anthropic")
    try:
        assert isinstance(chosen.client, AnthropicClient)
        assert chosen.client.base_url.rstrip("/").endswith(upstream.base_url.removesuffix("/v1"))
        assert chosen.config == ANTHROPIC_GATEWAY_CONFIG
        assert not chosen.local
    finally:
        await chosen.aclose()


async def test_count_tokens_asks_the_upstream_with_what_a_count_takes(
    client: AnthropicClient, upstream: ScriptedUpstream
) -> None:
    counted = await client.count_tokens(
        model="m",
        messages=MESSAGES,
        tools=[WEATHER],
        options={"stop": "END", "thinking": {"type": "enabled", "budget_tokens": 64}},
    )
    sent = upstream.requests[-1]
    assert counted == count_of(sent)
    assert set(sent) == {"model", "messages", "system", "tools", "thinking"}
    assert sent["messages"][1]["content"][0] == THOUGHT


async def test_only_the_newest_cache_breakpoints_are_sent() -> None:
    """A window's stored messages keep the cache marks of their own calls; Anthropic takes
    four in a request: the newest (the client's latest call's) stay, the rest go."""
    ephemeral = {"type": "ephemeral"}

    def said(text: str, marked: bool) -> MessageIn:
        block: dict[str, Any] = {"type": "text", "text": text}
        if marked:
            block["cache_control"] = ephemeral
        role = "user" if text.startswith("u") else "assistant"
        original = {"role": role, "content": [block]}
        return {"role": role, "content": text, ORIGINAL_KEY: original}

    window = [said(f"{'ua'[n % 2]}{n}", marked=n != 3) for n in range(7)]
    body, _ = request_body("m", window, None, None, None, None, None)
    marks = [
        "cache_control" in block for message in body["messages"] for block in message["content"]
    ]
    assert marks == [False, False, True, False, True, True, True]
    assert [m["content"][0]["text"] for m in body["messages"]] == [
        f"{'ua'[n % 2]}{n}" for n in range(7)
    ]
    assert len(body["messages"]) == 7
