"""`AnthropicClient` against a scripted server speaking Anthropic's Messages API: the chat
request's fields in their Messages places, stored messages sent verbatim, the answer (and its
stream) read back with its thinking and citations, and every failure (a refusal, an error
event mid-stream, a stream cut short, an answer it cannot read) an `LLMError` with the
reason. The raw streams are written as Anthropic's streaming documentation shows them."""

from __future__ import annotations

import json
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


# -- streams and answers that go wrong, or get rich ------------------------------------------

ASK: list[MessageIn] = [{"role": "user", "content": "How long is the Rhine?"}]
Event = dict[str, Any]
CITATION: dict[str, Any] = {
    "type": "char_location",
    "cited_text": "The Rhine is 1,230 km long.",
    "document_index": 0,
    "document_title": "Rivers",
    "start_char_index": 0,
    "end_char_index": 27,
}
MESSAGE: dict[str, Any] = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-test",
    "content": [],
    "stop_reason": None,
    "usage": {"input_tokens": 12, "output_tokens": 1},
}
START: Event = {"type": "message_start", "message": MESSAGE}


def text_block(index: int, *deltas: Event) -> list[Event]:
    """A text block's events: its start, `deltas`, its stop."""
    return [
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "text", "text": ""},
        },
        *({"type": "content_block_delta", "index": index, "delta": d} for d in deltas),
        {"type": "content_block_stop", "index": index},
    ]


END: list[Event] = [
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}},
    {"type": "message_stop"},
]


def sse(events: list[Event]) -> RawBody:
    """The events as the server-sent events Anthropic's API streams."""
    body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    return RawBody(body, content_type="text/event-stream")


async def streamed(client: AnthropicClient) -> list[Any]:
    return [event async for event in client.stream(model="m", messages=ASK, meta=META)]


async def test_citations_streamed_as_deltas_are_kept_on_their_block(
    client: AnthropicClient, upstream: ScriptedUpstream
) -> None:
    """A cited answer streams its citations as ``citations_delta`` events: the message the
    stream ends with holds them on the text block they cite for (what is stored and sent
    again), and the text is the deltas' text."""
    upstream.push(
        sse(
            [
                START,
                *text_block(
                    0,
                    {"type": "citations_delta", "citation": CITATION},
                    {"type": "text_delta", "text": "It is 1,230 km long."},
                ),
                *END,
            ]
        )
    )
    events = await streamed(client)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["It is 1,230 km long."]
    end = events[-1]
    assert isinstance(end, StreamEnd)
    assert end.completion.text == "It is 1,230 km long."
    assert end.completion.raw is not None
    assert end.completion.raw["content"] == [
        {"type": "text", "text": "It is 1,230 km long.", "citations": [CITATION]}
    ]
    assert end.completion.finish_reason == "stop"


@pytest.mark.parametrize(
    ("events", "words", "retryable"),
    [
        pytest.param(
            [
                START,
                *text_block(0, {"type": "text_delta", "text": "It is"}),
                {
                    "type": "error",
                    "error": {"type": "overloaded_error", "message": "Overloaded"},
                },
            ],
            "Overloaded",
            True,
            id="overloaded-midstream",
        ),
        pytest.param(
            [START, *text_block(0, {"type": "text_delta", "text": "It is"})],
            "ended before the message did",
            True,
            id="cut-before-message-stop",
        ),
        pytest.param(
            [
                START,
                {
                    "type": "content_block_delta",
                    "index": 3,
                    "delta": {"type": "text_delta", "text": "?"},
                },
                *END,
            ],
            "stream has the wrong shape",
            False,
            id="delta-of-no-block",
        ),
    ],
)
async def test_a_stream_that_goes_wrong_is_an_llm_error_saying_how(
    client: AnthropicClient,
    upstream: ScriptedUpstream,
    events: list[dict[str, Any]],
    words: str,
    retryable: bool,
) -> None:
    """The failure is an `LLMError` naming it, retryable when another attempt may well
    succeed (an overloaded server, a cut connection), not when the answer is unreadable."""
    upstream.push(sse(events))
    with pytest.raises(LLMError) as failed:
        await streamed(client)
    assert words in str(failed.value)
    assert failed.value.retryable is retryable


@pytest.mark.parametrize(
    ("kind", "status", "retryable"),
    [
        pytest.param("overloaded_error", 529, True, id="overloaded"),
        pytest.param("rate_limit_error", 429, True, id="rate-limited"),
        pytest.param("api_error", 500, True, id="api-error"),
        pytest.param("invalid_request_error", 400, False, id="invalid-request"),
        pytest.param("a_new_error", None, False, id="unknown-type"),
    ],
)
async def test_an_error_event_has_the_status_its_type_stands_for(
    client: AnthropicClient,
    upstream: ScriptedUpstream,
    kind: str,
    status: int | None,
    retryable: bool,
) -> None:
    """A stream answers 200 before it fails: the error event's type says what failed (an
    ``overloaded_error`` is Anthropic's 529), never the stream's 200."""
    error = {"type": "error", "error": {"type": kind, "message": "Something failed."}}
    upstream.push(sse([START, error]))
    with pytest.raises(LLMError) as failed:
        await streamed(client)
    assert failed.value.status_code == status
    assert failed.value.retryable is retryable
    assert f"mid-stream: {kind}: Something failed." in str(failed.value)
    assert "200" not in str(failed.value)


async def test_an_answer_of_the_wrong_shape_is_an_llm_error(
    client: AnthropicClient, upstream: ScriptedUpstream
) -> None:
    """A message whose usage is no number is refused as the upstream's fault, not read."""
    message = {**MESSAGE, "content": [{"type": "text", "text": "Hi"}]}
    upstream.push(RawBody(json.dumps({**message, "usage": {"input_tokens": "many"}})))
    with pytest.raises(LLMError, match="answer has the wrong shape"):
        await client.complete(model="m", messages=ASK, meta=META)
