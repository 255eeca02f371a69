"""`AnthropicClient` against streams and answers as Anthropic's API can really send them when
things go wrong or get rich: citations arriving as deltas, an ``error`` event in the middle
of a stream (``overloaded_error``), a stream cut before ``message_stop``, events or answers of
a shape the client cannot read. Each is the answer whole or an `LLMError` saying what
happened, never a crash of another kind.

The server is the package's `ScriptedUpstream` answering with raw bodies (`RawBody`): the
events are written here as Anthropic's streaming documentation shows them.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from workingmem.llm import AnthropicClient, CallKind, CallMeta, LLMError, StreamEnd, TextDelta
from workingmem.llm.testing import RawBody, ScriptedUpstream
from workingmem.types import MessageIn

META = CallMeta(tenant_id="t1", kind=CallKind.ANSWER, model="m", thread_id="th1")
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
