"""ScriptedUpstream: the OpenAI-compatible test server behaves as the protocol says."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from workingmem.llm.testing import (
    DEFAULT_MODEL,
    Delay,
    Drop,
    Reply,
    ScriptedUpstream,
    StatusError,
    echo,
    tool_call,
)


@pytest.fixture
def upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream() as server:
        yield server


def post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(
        url + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, dict(error.headers), error.read()


def test_default_responder_echoes_the_last_user_message(upstream: ScriptedUpstream) -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "text", "text": "second"}]},
        ],
    }

    status, _, raw = post(upstream.base_url, body)

    answer = json.loads(raw)
    assert status == 200
    assert answer["object"] == "chat.completion"
    assert answer["model"] == "m"
    assert answer["choices"][0]["message"] == {"role": "assistant", "content": "second"}
    assert answer["choices"][0]["finish_reason"] == "stop"
    assert answer["usage"]["total_tokens"] == (
        answer["usage"]["prompt_tokens"] + answer["usage"]["completion_tokens"]
    )
    assert upstream.requests == [body]


def test_queue_then_responder(upstream: ScriptedUpstream) -> None:
    """Queued responses are taken in order; script replaces the queue, push appends."""
    upstream.push("one", "two")
    upstream.script("three").push(Reply("four"))
    assert upstream.pending == 2

    texts = [
        json.loads(post(upstream.base_url, {"messages": [{"role": "user", "content": "echo"}]})[2])[
            "choices"
        ][0]["message"]["content"]
        for _ in range(3)
    ]

    assert texts == ["three", "four", "echo"]
    assert upstream.pending == 0


def test_custom_responder() -> None:
    seen: list[dict[str, Any]] = []

    def responder(request: dict[str, Any]) -> str:
        seen.append(request)
        return f"{len(request['messages'])} messages"

    with ScriptedUpstream(responder) as upstream:
        _, _, raw = post(upstream.base_url, {"messages": [{"role": "user", "content": "x"}]})

    assert json.loads(raw)["choices"][0]["message"]["content"] == "1 messages"
    assert len(seen) == 1


def test_a_failing_responder_is_a_500() -> None:
    def responder(request: dict[str, Any]) -> str:
        raise RuntimeError("bug in the test")

    with ScriptedUpstream(responder) as upstream:
        status, _, raw = post(upstream.base_url, {"messages": []})

    assert status == 500
    assert "bug in the test" in json.loads(raw)["error"]["message"]


def test_status_error_has_an_openai_body_and_retry_headers(upstream: ScriptedUpstream) -> None:
    upstream.push(StatusError(429, "slow down", retry_after=0.25))

    status, headers, raw = post(upstream.base_url, {"messages": []})

    assert status == 429
    assert headers["retry-after-ms"] == "250"
    assert headers["Retry-After"] == "1"
    assert json.loads(raw) == {
        "error": {
            "message": "slow down",
            "type": "rate_limit_exceeded",
            "param": None,
            "code": None,
        }
    }


def test_sse_wire_format(upstream: ScriptedUpstream) -> None:
    """A streamed answer is `data: {chunk}` events ending in `data: [DONE]`."""
    upstream.push(Reply("abcdefghij", chunk_chars=4, prompt_tokens=7, completion_tokens=2))

    status, headers, raw = post(
        upstream.base_url,
        {"messages": [], "stream": True, "stream_options": {"include_usage": True}},
    )

    assert status == 200
    assert headers["Content-Type"] == "text/event-stream"
    events = raw.decode().split("\n\n")
    assert events[-1] == ""
    assert events[-2] == "data: [DONE]"
    chunks = [json.loads(event.removeprefix("data: ")) for event in events[:-2]]
    assert all(event.startswith("data: ") for event in events[:-1])
    assert [c["choices"][0]["delta"].get("content") for c in chunks[1:4]] == ["abcd", "efgh", "ij"]
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {
        "prompt_tokens": 7,
        "completion_tokens": 2,
        "total_tokens": 9,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


async def test_stream_through_the_sdk(upstream: ScriptedUpstream) -> None:
    """The SDK's own stream parser reads the stream: text, tool calls and the usage chunk."""
    call = tool_call("lookup", {"q": "lyon"}, id="call_7")
    upstream.push(
        Reply("Streaming works.", tool_calls=[call], prompt_tokens=5, completion_tokens=4)
    )

    async with openai.AsyncOpenAI(base_url=upstream.base_url, api_key="sk-test") as sdk:
        stream = await sdk.chat.completions.create(
            model="cheap",
            messages=[{"role": "user", "content": "go"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    calls = [
        tc.model_dump(exclude_none=True)
        for c in chunks
        if c.choices
        for tc in c.choices[0].delta.tool_calls or ()
    ]
    finish = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert text == "Streaming works."
    assert calls == [{"index": 0, **call}]
    assert finish == ["tool_calls"]
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == 9
    assert upstream.requests[0]["stream"] is True


async def test_stream_without_usage(upstream: ScriptedUpstream) -> None:
    async with openai.AsyncOpenAI(base_url=upstream.base_url, api_key="sk-test") as sdk:
        stream = await sdk.chat.completions.create(
            model="cheap", messages=[{"role": "user", "content": "hi there"}], stream=True
        )
        chunks = [chunk async for chunk in stream]

    assert all(chunk.usage is None for chunk in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "hi there"


async def test_models_list(upstream: ScriptedUpstream) -> None:
    async with openai.AsyncOpenAI(base_url=upstream.base_url, api_key="sk-test") as sdk:
        models = [model.id async for model in sdk.models.list()]

    assert models == [DEFAULT_MODEL]


def test_unknown_route_is_a_404(upstream: ScriptedUpstream) -> None:
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(upstream.base_url + "/embeddings", timeout=5)
    caught.value.close()

    assert caught.value.code == 404


def test_drop_closes_without_an_answer(upstream: ScriptedUpstream) -> None:
    upstream.push(Drop())

    with pytest.raises((urllib.error.URLError, ConnectionError)):
        post(upstream.base_url, {"messages": []})

    assert len(upstream.requests) == 1


def test_close_wakes_delayed_answers_and_joins_every_thread() -> None:
    """Closing never waits out a Delay and leaves no thread behind."""
    before = set(threading.enumerate())
    upstream = ScriptedUpstream().start()
    port = urllib.parse.urlsplit(upstream.base_url).port
    upstream.push(Delay(60.0))
    failures: list[BaseException] = []

    def call() -> None:
        try:
            post(upstream.base_url, {"messages": []})
        except (urllib.error.URLError, ConnectionError) as exc:
            failures.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    while not upstream.requests:
        time.sleep(0.01)

    started = time.perf_counter()
    upstream.close()
    caller.join()

    assert time.perf_counter() - started < 5
    assert len(failures) == 1  # the delayed request got no answer
    left = [t.name for t in set(threading.enumerate()) - before]
    # its own, the serving thread and the connections', each named after its port: another
    # test's server still serving in this process may start connection threads meanwhile
    assert [n for n in left if n.startswith(f"ScriptedUpstream:{port}")] == []


async def test_async_context_manager() -> None:
    async with ScriptedUpstream() as upstream:
        status, _, _ = await asyncio.to_thread(post, upstream.base_url, {"messages": []})
        assert status == 200
    with pytest.raises(RuntimeError, match="not started"):
        _ = upstream.base_url


def test_echo_without_a_user_message() -> None:
    assert echo({"messages": [{"role": "system", "content": "x"}]}) == Reply("")
