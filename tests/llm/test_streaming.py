"""Streamed chat completions: OpenAIClient.stream and GuardedClient.stream, through the real
`openai` SDK against ScriptedUpstream's server-sent events."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Sequence
from typing import Any

import openai
import pytest

from tests.llm.conftest import Http, assert_caused_by
from tests.llm.test_guarded_client import FakeProvider
from workingmem.llm import (
    CallKind,
    CallMeta,
    Completion,
    GuardedClient,
    LLMError,
    LLMTracer,
    OpenAIClient,
    StreamEnd,
    StreamEvent,
    StreamingLLMClient,
    TextDelta,
    TokenBudgetGuard,
    Usage,
    UsageRefusedError,
)
from workingmem.llm.testing import (
    Drop,
    RawBody,
    Reply,
    ScriptedUpstream,
    StatusError,
    tool_call,
)

META = CallMeta(tenant_id="t1", kind=CallKind.ANSWER, model="cheap", thread_id="th1")
HELLO = [{"role": "user", "content": "Hello"}]
FAST_RETRY = 0.01
ONE_CONNECTION = type(openai.DEFAULT_CONNECTION_LIMITS)(max_connections=1)
"""A connection pool of one, in the Limits type of the SDK's own HTTP library."""


@pytest.fixture
def upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream() as server:
        yield server


@pytest.fixture
async def client(upstream: ScriptedUpstream, http: Http) -> AsyncIterator[OpenAIClient]:
    async with OpenAIClient(
        base_url=upstream.base_url, timeout=5.0, max_retries=0, http=http
    ) as opened:
        yield opened


def stream(
    client: OpenAIClient | GuardedClient, meta: CallMeta = META, **options: Any
) -> AsyncGenerator[StreamEvent, None]:
    return client.stream(model=meta.model, messages=HELLO, meta=meta, **options)


async def collect(events: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in events]


def sse(*chunks: dict[str, Any], done: bool = True) -> RawBody:
    """A stream written by hand: each chunk a `data:` event, then ``[DONE]`` unless not."""
    body = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks)
    if done:
        body += "data: [DONE]\n\n"
    return RawBody(body, content_type="text/event-stream")


def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "cheap",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


# -- OpenAIClient.stream -------------------------------------------------------------------------


async def test_text_arrives_in_pieces_then_the_whole_answer(
    upstream: ScriptedUpstream, client: OpenAIClient
) -> None:
    """Each content chunk is a TextDelta; StreamEnd holds the text joined and the usage."""
    upstream.push(
        Reply(
            "Hello there, Ada!",
            chunk_chars=5,
            prompt_tokens=9,
            completion_tokens=4,
            model="cheap-2024",
        )
    )

    events = await collect(stream(client))

    assert events == [
        TextDelta("Hello"),
        TextDelta(" ther"),
        TextDelta("e, Ad"),
        TextDelta("a!"),
        StreamEnd(
            Completion(
                text="Hello there, Ada!",
                usage=Usage(prompt_tokens=9, completion_tokens=4),
                model="cheap-2024",
                finish_reason="stop",
            )
        ),
    ]
    assert {event.model for event in events if isinstance(event, TextDelta)} == {"cheap-2024"}
    (request,) = upstream.requests
    assert request["stream"] is True
    assert request["stream_options"] == {"include_usage": True}


async def test_options_are_passed_through(upstream: ScriptedUpstream, client: OpenAIClient) -> None:
    """max_tokens, temperature and tools reach the upstream; the meta does not."""
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]

    await collect(stream(client, max_tokens=64, temperature=0.0, tools=tools))

    (request,) = upstream.requests
    assert request["max_tokens"] == 64
    assert request["temperature"] == 0.0
    assert request["tools"] == tools
    assert "t1" not in json.dumps(request)


async def test_parallel_tool_calls_are_assembled(
    upstream: ScriptedUpstream, client: OpenAIClient
) -> None:
    """Two tool calls, streamed as deltas, end up in OpenAI message format, in order."""
    calls = [
        tool_call("lookup", {"q": "weather"}, id="call_a"),
        tool_call("update_working_memory", {"content": "# Notes"}, id="call_b"),
    ]
    upstream.push(Reply(None, tool_calls=calls, prompt_tokens=20, completion_tokens=10))

    events = await collect(stream(client))

    assert events == [
        StreamEnd(
            Completion(
                text="",
                usage=Usage(20, 10),
                model="cheap",
                finish_reason="tool_calls",
                tool_calls=tuple(calls),
            )
        )
    ]


async def test_tool_call_fragments_are_joined_by_index(
    upstream: ScriptedUpstream, client: OpenAIClient
) -> None:
    """Arguments split over interleaved deltas are concatenated per call; an id or a name
    repeated on every delta (as some servers do) is not doubled."""
    upstream.push(
        sse(
            chunk({"role": "assistant", "content": None}),
            chunk({"tool_calls": [_call(0, '{"q": ', id="call_a", name="lookup")]}),
            chunk({"tool_calls": [_call(1, '{"content"', id="call_b", name="update")]}),
            chunk({"tool_calls": [_call(0, '"weather"}', id="call_a", name="lookup")]}),
            chunk({"tool_calls": [_call(1, ': "x"}')]}),
            chunk({}, "tool_calls"),
        )
    )

    (end,) = await collect(stream(client))

    assert isinstance(end, StreamEnd)
    assert end.completion.tool_calls == (
        tool_call("lookup", '{"q": "weather"}', id="call_a"),
        tool_call("update", '{"content": "x"}', id="call_b"),
    )
    assert end.completion.usage == Usage(0, 0)


async def test_tool_call_deltas_without_an_index(
    upstream: ScriptedUpstream, client: OpenAIClient
) -> None:
    """Some servers leave the index out (and the choice's): a new id starts a call, a delta
    without one continues the last."""
    first, second = _call(0, "{}", id="call_a", name="a"), _call(0, '{"x"', id="call_b", name="b")
    rest = _call(0, ": 1}")
    for delta in (first, second, rest):
        del delta["index"]
    upstream.push(
        sse(
            {"model": "m", "choices": [{"delta": {"tool_calls": [first]}}]},
            {"model": "m", "choices": [{"delta": {"tool_calls": [second]}}]},
            {"model": "m", "choices": [{"delta": {"tool_calls": [rest]}}]},
            {"model": "m", "choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
        )
    )

    (end,) = await collect(stream(client))

    assert isinstance(end, StreamEnd)
    assert end.completion.tool_calls == (
        tool_call("a", "{}", id="call_a"),
        tool_call("b", '{"x": 1}', id="call_b"),
    )


def _call(
    index: int, arguments: str, *, id: str | None = None, name: str | None = None
) -> dict[str, Any]:
    function: dict[str, Any] = {"arguments": arguments}
    if name is not None:
        function["name"] = name
    delta: dict[str, Any] = {"index": index, "function": function}
    if id is not None:
        delta.update(id=id, type="function")
    return delta


async def test_server_without_usage_gives_zero(
    upstream: ScriptedUpstream, client: OpenAIClient
) -> None:
    """A server that sends no usage chunk: Usage(0, 0), not an error."""
    upstream.push(Reply("ok", usage=False))

    *_, end = await collect(stream(client))

    assert end == StreamEnd(
        Completion(text="ok", usage=Usage(0, 0), model="cheap", finish_reason="stop")
    )


async def test_stream_options_rejected_once_then_left_out(
    upstream: ScriptedUpstream, client: OpenAIClient
) -> None:
    """A server that does not know stream_options gets the request again without it, and this
    client stops sending it: the stream works, without usage."""
    upstream.push(StatusError(400, "Unrecognized request argument supplied: stream_options"))

    *deltas, end = await collect(stream(client))
    await collect(stream(client))

    assert deltas == [TextDelta("Hello")]
    assert isinstance(end, StreamEnd)
    assert end.completion.usage == Usage(0, 0)
    first, retry, later = upstream.requests
    assert "stream_options" in first
    assert "stream_options" not in retry
    assert "stream_options" not in later


async def test_other_400s_are_not_retried_without_stream_options(
    upstream: ScriptedUpstream, client: OpenAIClient
) -> None:
    upstream.push(StatusError(400, "Unsupported parameter: 'tools'"))

    with pytest.raises(LLMError) as caught:
        await collect(stream(client))

    assert caught.value.status_code == 400
    assert not caught.value.retryable
    assert str(caught.value) == "upstream status 400: Unsupported parameter: 'tools'"
    assert len(upstream.requests) == 1


async def test_retries_apply_before_the_stream_starts(upstream: ScriptedUpstream) -> None:
    """A 503 before any event is retried by the SDK, like a plain completion."""
    upstream.push(StatusError(503, "busy", retry_after=FAST_RETRY), Reply("second try"))

    async with OpenAIClient(base_url=upstream.base_url, max_retries=1) as client:
        *_, end = await collect(stream(client))

    assert isinstance(end, StreamEnd)
    assert end.completion.text == "second try"
    assert len(upstream.requests) == 2


async def test_error_status_before_streaming(
    upstream: ScriptedUpstream, client: OpenAIClient, http: Http
) -> None:
    """A status error is an LLMError as `complete` makes it, raised from the first event."""
    upstream.push(StatusError(500, "boom"))
    events = stream(client)  # nothing is sent before the iteration starts
    assert upstream.requests == []

    with pytest.raises(LLMError) as caught:
        await collect(events)

    assert caught.value.status_code == 500
    assert caught.value.retryable
    assert "boom" in str(caught.value)
    assert_caused_by(caught.value, http, "status")


async def test_connection_dropped_before_the_answer(
    upstream: ScriptedUpstream, client: OpenAIClient, http: Http
) -> None:
    upstream.push(Drop())

    with pytest.raises(LLMError) as caught:
        await collect(stream(client))

    assert caught.value.status_code is None
    assert caught.value.retryable
    assert_caused_by(caught.value, http, "connection")


async def test_connection_dropped_mid_stream(
    upstream: ScriptedUpstream, client: OpenAIClient, http: Http
) -> None:
    """The text already streamed stays streamed; then the break is a retryable LLMError."""
    upstream.push(Reply("a long answer, cut short", chunk_chars=4, drop_after_chunks=3))
    seen: list[StreamEvent] = []

    async def read() -> None:
        async for event in stream(client):
            seen.append(event)

    with pytest.raises(LLMError, match="broke off") as caught:
        await read()

    assert seen == [TextDelta("a lo"), TextDelta("ng a")]  # the role chunk, then two pieces
    assert caught.value.status_code is None
    assert caught.value.retryable
    assert_caused_by(caught.value, http, "connection")
    assert len(upstream.requests) == 1  # never retried once the answer has begun


async def test_stream_that_ends_before_its_finish_reason(
    upstream: ScriptedUpstream, client: OpenAIClient
) -> None:
    """A body that simply stops (no finish_reason, no [DONE]) is a truncated answer, not a
    complete one."""
    upstream.push(sse(chunk({"role": "assistant", "content": "half an"}), done=False))

    with pytest.raises(LLMError, match="ended before the answer did") as caught:
        await collect(stream(client))

    assert caught.value.retryable


async def test_error_event_mid_stream(upstream: ScriptedUpstream, client: OpenAIClient) -> None:
    """An error the server sends in place of the next chunk is an LLMError with its message."""
    upstream.push(
        sse(chunk({"content": "Hel"}), {"error": {"message": "model overloaded"}}, done=False)
    )

    with pytest.raises(LLMError, match="failed mid-stream: model overloaded"):
        await collect(stream(client))


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(sse(done=False), id="empty"),
        pytest.param(
            RawBody("data: {not json\n\n", content_type="text/event-stream"), id="bad-json"
        ),
        pytest.param(sse({"choices": "nope"}), id="wrong-shape"),
    ],
)
async def test_unreadable_stream(
    upstream: ScriptedUpstream, client: OpenAIClient, body: RawBody
) -> None:
    """A 200 whose events are no chat completion chunks is an LLMError, never another crash."""
    upstream.push(body)

    with pytest.raises(LLMError):
        await collect(stream(client))


async def test_consumer_stopping_early_releases_the_connection(upstream: ScriptedUpstream) -> None:
    """aclose() after the first delta closes the HTTP response: with a pool of one connection,
    the next request on the same client gets it (a leaked one would time out waiting)."""
    upstream.push(Reply("x" * 10_000, chunk_chars=10), Reply("next"))
    sdk = openai.AsyncOpenAI(
        base_url=upstream.base_url,
        api_key="sk-test",
        max_retries=0,
        timeout=2.0,
        http_client=openai.DefaultAsyncHttpxClient(limits=ONE_CONNECTION),
    )
    async with sdk:
        client = OpenAIClient(client=sdk)
        events = stream(client)
        first = await anext(events)
        await events.aclose()

        *_, end = await collect(stream(client))

    assert first == TextDelta("x" * 10)
    assert isinstance(end, StreamEnd)
    assert end.completion.text == "next"


async def test_is_a_streaming_client(client: OpenAIClient) -> None:
    assert isinstance(client, StreamingLLMClient)
    assert isinstance(GuardedClient(client), StreamingLLMClient)


# -- GuardedClient.stream ------------------------------------------------------------------------


class RecordingGuard:
    def __init__(self, refuse: str | None = None) -> None:
        self.refuse = refuse
        self.checked: list[CallMeta] = []
        self.recorded: list[tuple[CallMeta, Usage]] = []

    async def check(self, meta: CallMeta) -> str | None:
        self.checked.append(meta)
        return self.refuse

    async def record(self, meta: CallMeta, usage: Usage) -> None:
        self.recorded.append((meta, usage))


def llm_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == "workingmem.llm"]


async def test_guarded_refusal_sends_nothing(
    upstream: ScriptedUpstream, client: OpenAIClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="workingmem.llm")
    guard = RecordingGuard(refuse="over budget")

    with pytest.raises(UsageRefusedError, match="over budget"):
        await collect(stream(GuardedClient(client, guard=guard)))

    assert upstream.requests == []
    assert guard.recorded == []
    (line,) = llm_lines(caplog)
    assert "outcome=refused" in line.getMessage()


async def test_guarded_stream_passes_events_and_records_usage_per_tenant(
    upstream: ScriptedUpstream, client: OpenAIClient
) -> None:
    guard = TokenBudgetGuard(tenant_budgets={"A": 100})
    guarded = GuardedClient(client, guard=guard)
    upstream.push(Reply("Hi there", chunk_chars=4, prompt_tokens=90, completion_tokens=20))
    tenant_a = CallMeta(tenant_id="A", kind=CallKind.ANSWER, model="cheap")

    events = await collect(stream(guarded, tenant_a))

    assert events[:2] == [TextDelta("Hi t"), TextDelta("here")]
    assert events[2] == StreamEnd(
        Completion(text="Hi there", usage=Usage(90, 20), model="cheap", finish_reason="stop")
    )
    assert guard.spent("A") == 110
    assert guard.spent("B") == 0
    with pytest.raises(UsageRefusedError, match="spent 110 of its 100-token budget"):
        await collect(stream(guarded, tenant_a))
    assert len(upstream.requests) == 1


async def test_guarded_stream_logs_one_line_by_its_end(
    upstream: ScriptedUpstream, client: OpenAIClient, caplog: pytest.LogCaptureFixture
) -> None:
    """The trace is written before StreamEnd is handed on: a consumer that stops there (and
    never closes the stream) still leaves exactly one line, with the usage."""
    caplog.set_level(logging.INFO, logger="workingmem.llm")
    upstream.push(Reply("ok", prompt_tokens=40, completion_tokens=2))
    events = stream(GuardedClient(client))

    async with contextlib.aclosing(events):
        async for event in events:
            if isinstance(event, StreamEnd):
                (line,) = llm_lines(caplog)
                break

    assert len(llm_lines(caplog)) == 1
    assert line.levelno == logging.INFO
    for part in ("kind=ANSWER", "outcome=ok", "tenant=t1", "prompt_tokens=40", "total_tokens=42"):
        assert part in line.getMessage()


async def test_guarded_stream_closed_early_is_traced_as_cancelled(
    upstream: ScriptedUpstream, client: OpenAIClient, caplog: pytest.LogCaptureFixture
) -> None:
    """A consumer that goes away mid-stream: one `cancelled` line, no usage recorded (the
    upstream reports it only at the end), and the client still works."""
    caplog.set_level(logging.INFO, logger="workingmem.llm")
    guard = RecordingGuard()
    guarded = GuardedClient(client, guard=guard)
    upstream.push(Reply("a longer answer", chunk_chars=3))

    events = stream(guarded)
    assert await anext(events) == TextDelta("a l")
    await events.aclose()

    (line,) = llm_lines(caplog)
    assert line.levelno == logging.WARNING
    assert "outcome=cancelled" in line.getMessage()
    assert guard.recorded == []
    *_, end = await collect(stream(guarded))
    assert isinstance(end, StreamEnd)


async def test_abandoned_stream_is_closed_by_the_event_loop(
    upstream: ScriptedUpstream, client: OpenAIClient, caplog: pytest.LogCaptureFixture
) -> None:
    """A consumer that iterates with `async for` inside its own generator and is closed never
    closes the stream itself; the event loop finalizes the abandoned generator, which closes
    the response and traces the call as cancelled (`contextlib.aclosing` does it at once)."""
    caplog.set_level(logging.INFO, logger="workingmem.llm")
    upstream.push(Reply("a longer answer", chunk_chars=3), Reply("next"))

    async def texts() -> AsyncGenerator[str, None]:
        async for event in stream(GuardedClient(client)):
            if isinstance(event, TextDelta):
                yield event.text

    outer = texts()
    assert await anext(outer) == "a l"
    await outer.aclose()
    del outer
    for _ in range(100):
        if llm_lines(caplog):
            break
        await asyncio.sleep(0.01)

    (line,) = llm_lines(caplog)
    assert "outcome=cancelled" in line.getMessage()
    *_, end = await collect(stream(client))
    assert isinstance(end, StreamEnd)


async def test_guarded_stream_failure_is_traced_and_not_recorded(
    upstream: ScriptedUpstream, client: OpenAIClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="workingmem.llm")
    guard = RecordingGuard()
    upstream.push(Reply("cut short", chunk_chars=2, drop_after_chunks=2))

    with pytest.raises(LLMError):
        await collect(stream(GuardedClient(client, guard=guard)))

    assert guard.recorded == []
    (line,) = llm_lines(caplog)
    assert "outcome=error" in line.getMessage()
    assert "error_type=LLMError" in line.getMessage()


async def test_guarded_stream_meta_names_the_model_called(client: OpenAIClient) -> None:
    guard = RecordingGuard()

    await collect(
        GuardedClient(client, guard=guard).stream(model="other", messages=HELLO, meta=META)
    )

    assert [meta.model for meta in guard.checked] == ["other"]
    assert [meta.model for meta, _ in guard.recorded] == ["other"]


class CompleteOnly:
    """A host's LLMClient that cannot stream."""

    async def complete(self, *, model: str, messages: Sequence[Any], **_: Any) -> Completion:
        return Completion(text="fixed", usage=Usage(1, 1), model=model)


async def test_guarding_a_client_that_cannot_stream() -> None:
    guarded = GuardedClient(CompleteOnly())

    with pytest.raises(TypeError, match="CompleteOnly cannot stream"):
        await collect(stream(guarded))


async def test_guarded_stream_span(upstream: ScriptedUpstream, client: OpenAIClient) -> None:
    """A streamed call has its span too, with the usage of the StreamEnd."""
    provider = FakeProvider()
    guarded = GuardedClient(client, tracer=LLMTracer(tracer_provider=provider))
    upstream.push(Reply("ok", prompt_tokens=40, completion_tokens=2))

    await collect(stream(guarded))

    (span,) = provider.tracer.spans
    assert span.name == "workingmem.llm.ANSWER"
    assert span.attributes["workingmem.llm.outcome"] == "ok"
    assert span.attributes["gen_ai.usage.input_tokens"] == 40
    assert span.attributes["gen_ai.response.finish_reasons"] == ["stop"]
