"""`OpenAIResponsesClient` against a scripted server speaking the Responses API: the chat
request's fields in their Responses places, the answer read back, and every failure an
`LLMError` with the reason."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from workingmem.formats import ORIGINAL_KEY
from workingmem.llm import (
    CallKind,
    CallMeta,
    LLMError,
    OpenAIResponsesClient,
    StreamEnd,
    TextDelta,
)
from workingmem.llm.testing import RawBody, Reply, ScriptedUpstream, tool_call
from workingmem.types import MessageIn

pytestmark = pytest.mark.asyncio

META = CallMeta(tenant_id="t1", kind=CallKind.ANSWER, model="m", thread_id="th1")
MARK = {"mode": "explicit"}
KEPT = {"items": [{"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "x"}]}
MESSAGES: list[MessageIn] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello", ORIGINAL_KEY: KEPT},
    {"role": "user", "content": "Weather?"},
]


@pytest.fixture
async def upstream() -> AsyncIterator[ScriptedUpstream]:
    async with ScriptedUpstream() as server:
        yield server


@pytest.fixture
async def client(upstream: ScriptedUpstream) -> AsyncIterator[OpenAIResponsesClient]:
    async with OpenAIResponsesClient(base_url=upstream.base_url, max_retries=0) as responses:
        yield responses


async def test_the_chat_request_becomes_a_responses_request(
    client: OpenAIResponsesClient, upstream: ScriptedUpstream
) -> None:
    upstream.push(Reply(None, tool_calls=[tool_call("f", {"a": 1}, id="c1")], reasoning="r"))
    completion = await client.complete(
        model="m",
        messages=MESSAGES,
        meta=META,
        max_tokens=50,
        temperature=0.5,
        tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}],
        options={
            "tool_choice": {"type": "function", "function": {"name": "f"}},
            "reasoning_effort": "low",
            "verbosity": "low",
            "response_format": {"type": "json_object"},
            "top_p": 0.9,
        },
    )
    (sent,) = upstream.requests
    assert sent["instructions"] == "Be brief."
    assert sent["input"] == [
        {"role": "user", "content": "Hi"},
        KEPT["items"][0],
        {"role": "user", "content": "Weather?"},
    ]
    assert (sent["max_output_tokens"], sent["temperature"], sent["top_p"]) == (50, 0.5, 0.9)
    assert sent["tools"] == [{"type": "function", "name": "f", "parameters": {}}]
    assert sent["tool_choice"] == {"type": "function", "name": "f"}
    assert sent["reasoning"] == {"effort": "low"}
    assert sent["text"] == {"format": {"type": "json_object"}, "verbosity": "low"}
    assert sent["store"] is False
    assert completion.finish_reason == "tool_calls"
    assert completion.tool_calls == (
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}},
    )
    assert completion.raw is not None
    assert completion.raw["output"][0]["encrypted_content"] == "r"


async def test_a_window_of_marked_items_keeps_the_marks_openai_matches_at(
    client: OpenAIResponsesClient, upstream: ScriptedUpstream
) -> None:
    """Each turn of a window kept the mark its request gave it; OpenAI matches its cache at
    the newest 80 marks of a conversation, so the older ones are left out of what is sent."""

    def marked(n: int) -> MessageIn:
        part = {"type": "input_text", "text": f"Turn {n}.", "prompt_cache_breakpoint": MARK}
        return {
            "role": "user",
            "content": f"Turn {n}.",
            ORIGINAL_KEY: {"items": [{"role": "user", "content": [part]}]},
        }

    upstream.push(Reply("ok"))
    await client.complete(model="m", messages=[marked(n) for n in range(82)], meta=META)
    sent = upstream.requests[0]["input"]
    assert ["prompt_cache_breakpoint" in item["content"][0] for item in sent] == [
        False,
        False,
    ] + [True] * 80


async def test_a_json_schema_format_and_a_cut_answer(
    client: OpenAIResponsesClient, upstream: ScriptedUpstream
) -> None:
    upstream.push(Reply('{"a"', finish_reason="length"))
    schema = {"name": "A", "schema": {"type": "object"}, "strict": True}
    completion = await client.complete(
        model="m",
        messages=MESSAGES[1:2],
        meta=META,
        response_format={"type": "json_schema", "json_schema": schema},
    )
    assert upstream.requests[0]["text"] == {"format": {"type": "json_schema", **schema}}
    assert (completion.text, completion.finish_reason) == ('{"a"', "length")


async def test_a_stream_yields_the_text_then_the_whole_answer(
    client: OpenAIResponsesClient,
) -> None:
    events = [e async for e in client.stream(model="m", messages=MESSAGES[1:2], meta=META)]
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert "".join(texts) == "Hi"
    end = events[-1]
    assert isinstance(end, StreamEnd)
    assert end.completion.text == "Hi"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"object": "chat.completion"}, "no response"),
        ({"object": "response", "status": "failed", "error": {"message": "boom"}}, "boom"),
        ({"object": "response", "output": [{"type": "message", "content": 3}]}, "wrong shape"),
    ],
)
async def test_an_answer_that_is_no_good_response_is_an_llm_error(
    client: OpenAIResponsesClient, upstream: ScriptedUpstream, body: object, reason: str
) -> None:
    upstream.push(RawBody(json.dumps(body)))
    with pytest.raises(LLMError, match=reason):
        await client.complete(model="m", messages=MESSAGES[1:2], meta=META)


async def test_a_stream_that_fails_or_breaks_off_is_an_llm_error(
    client: OpenAIResponsesClient, upstream: ScriptedUpstream
) -> None:
    failed = {"type": "response.failed", "response": {"error": {"message": "overloaded"}}}
    upstream.push(
        RawBody(
            f"event: response.failed\ndata: {json.dumps(failed)}\n\n",
            content_type="text/event-stream",
        )
    )
    with pytest.raises(LLMError, match="overloaded"):
        async for _ in client.stream(model="m", messages=MESSAGES[1:2], meta=META):
            pass
    upstream.push(Reply("A longer answer", drop_after_chunks=2))
    with pytest.raises(LLMError):
        async for _ in client.stream(model="m", messages=MESSAGES[1:2], meta=META):
            pass


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (
            [{"token": "Hi", "logprob": -0.1, "top_logprobs": []}],
            ({"token": "Hi", "logprob": -0.1, "top_logprobs": []},),
        ),
        ({"token": "Hi"}, None),
        (["Hi"], None),
    ],
)
async def test_an_answer_s_logprobs_are_a_list_of_tokens_or_none(
    client: OpenAIResponsesClient, upstream: ScriptedUpstream, given: object, expected: object
) -> None:
    """The chat API's `logprobs` ask is the Responses API's `include`; what comes back in
    another shape leaves the answer without logprobs, not failed."""
    text = {"type": "output_text", "text": "Hi", "annotations": [], "logprobs": given}
    body = {"object": "response", "output": [{"type": "message", "content": [text]}]}
    upstream.push(RawBody(json.dumps(body)))

    completion = await client.complete(
        model="m", messages=MESSAGES[1:2], meta=META, options={"logprobs": True, "top_logprobs": 1}
    )

    assert (completion.text, completion.logprobs) == ("Hi", expected)
    sent = upstream.requests[-1]
    assert "message.output_text.logprobs" in sent["include"]
    assert sent["top_logprobs"] == 1
    assert "logprobs" not in sent
