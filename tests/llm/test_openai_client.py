"""OpenAIClient against a real OpenAI-compatible server, through the real `openai` SDK."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Iterator

import openai
import pytest

from tests.llm.conftest import Http, assert_caused_by
from workingmem.errors import ValidationError
from workingmem.llm import CallKind, CallMeta, Completion, LLMClient, LLMError, OpenAIClient, Usage
from workingmem.llm.openai_client import NO_API_KEY
from workingmem.llm.testing import (
    Delay,
    Drop,
    RawBody,
    Reply,
    ScriptedUpstream,
    StatusError,
    tool_call,
)

META = CallMeta(tenant_id="t1", kind=CallKind.MEMORY_WORKING, model="cheap", thread_id="th1")
HELLO = [{"role": "user", "content": "Hello"}]
FAST_RETRY = 0.01
"""Seconds the scripted errors ask the SDK to wait before retrying: keeps the tests fast."""


@pytest.fixture
def upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream() as server:
        yield server


@pytest.fixture
async def client(upstream: ScriptedUpstream, http: Http) -> AsyncIterator[OpenAIClient]:
    async with OpenAIClient(
        base_url=upstream.base_url, timeout=5.0, max_retries=2, http=http
    ) as opened:
        yield opened


async def complete(client: LLMClient, **options: object) -> Completion:
    return await client.complete(model="cheap", messages=HELLO, meta=META, **options)  # type: ignore[arg-type]


async def test_text_answer_with_usage(upstream: ScriptedUpstream, client: OpenAIClient) -> None:
    """The answer's text, usage, model and finish reason come back as the server sent them."""
    upstream.push(Reply("Hi Ada", prompt_tokens=12, completion_tokens=3, model="cheap-2024"))

    completion = await complete(client)

    assert completion == Completion(
        text="Hi Ada",
        usage=Usage(prompt_tokens=12, completion_tokens=3),
        model="cheap-2024",
        finish_reason="stop",
    )
    assert completion.usage.total_tokens == 15
    assert upstream.requests == [{"model": "cheap", "messages": HELLO}]


async def test_options_are_passed_through(upstream: ScriptedUpstream, client: OpenAIClient) -> None:
    """response_format, tools, max_tokens and temperature reach the upstream as given."""
    schema = {
        "type": "json_schema",
        "json_schema": {"name": "memory", "schema": {"type": "object"}, "strict": True},
    }
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]

    await complete(client, response_format=schema, tools=tools, max_tokens=256, temperature=0.0)

    (request,) = upstream.requests
    assert request["response_format"] == schema
    assert request["tools"] == tools
    assert request["max_tokens"] == 256
    assert request["temperature"] == 0.0
    assert "meta" not in request
    assert "t1" not in json.dumps(request)


async def test_unset_options_are_not_sent(upstream: ScriptedUpstream, client: OpenAIClient) -> None:
    """None leaves a choice to the upstream: the field is absent, not null."""
    await complete(client, tools=[])

    assert set(upstream.requests[0]) == {"model", "messages"}


async def test_max_completion_tokens_param(upstream: ScriptedUpstream) -> None:
    """OpenAI's reasoning models want max_completion_tokens; the client can send that name."""
    async with OpenAIClient(
        base_url=upstream.base_url, max_tokens_param="max_completion_tokens"
    ) as client:
        await complete(client, max_tokens=64)

    assert upstream.requests[0]["max_completion_tokens"] == 64
    assert "max_tokens" not in upstream.requests[0]


async def test_tool_calls_in_openai_format(
    upstream: ScriptedUpstream, client: OpenAIClient
) -> None:
    """Tool calls come back as OpenAI message dicts, ready to forward."""
    call = tool_call("update_working_memory", {"content": "# Notes"}, id="call_1")
    upstream.push(Reply(None, tool_calls=[call]))

    completion = await complete(client)

    assert completion.text == ""
    assert completion.finish_reason == "tool_calls"
    assert completion.tool_calls == (call,)


async def test_missing_usage_is_zero(upstream: ScriptedUpstream, client: OpenAIClient) -> None:
    """An upstream that reports no usage gives Usage(0, 0), not an error."""
    upstream.push(Reply("ok", usage=False))

    completion = await complete(client)

    assert completion.usage == Usage(0, 0)


async def test_429_then_success_is_retried(
    upstream: ScriptedUpstream, client: OpenAIClient
) -> None:
    """A rate limit is retried by the SDK, after the server's Retry-After."""
    upstream.push(StatusError(429, retry_after=FAST_RETRY), Reply("after the wait"))

    completion = await complete(client)

    assert completion.text == "after the wait"
    assert len(upstream.requests) == 2


async def test_500s_until_retries_are_exhausted(
    upstream: ScriptedUpstream, client: OpenAIClient, http: Http
) -> None:
    """max_retries bounds the attempts; then the status comes back as a retryable LLMError."""
    upstream.push(*[StatusError(500, "boom", retry_after=FAST_RETRY)] * 5)

    with pytest.raises(LLMError) as caught:
        await complete(client)

    assert caught.value.status_code == 500
    assert caught.value.retryable
    assert "boom" in str(caught.value)
    assert len(upstream.requests) == 3  # the first attempt and two retries
    assert_caused_by(caught.value, http, "status")


@pytest.mark.parametrize(
    ("error", "attempts"),
    [
        pytest.param(StatusError(500, headers={"x-should-retry": "false"}), 1, id="told-not-to"),
        pytest.param(StatusError(400, headers={"x-should-retry": "true"}), 2, id="told-to"),
        pytest.param(StatusError(429, retry_after=121), 1, id="retry-after-too-long"),
        pytest.param(StatusError(409, retry_after=FAST_RETRY), 2, id="conflict"),
        pytest.param(StatusError(408, retry_after=FAST_RETRY), 2, id="request-timeout"),
    ],
)
async def test_the_upstream_says_when_to_retry(
    upstream: ScriptedUpstream, http: Http, error: StatusError, attempts: int
) -> None:
    """The SDK's policy on either transport: ``x-should-retry`` is obeyed, a wait of more
    than two minutes is not waited for, 408 and 409 are retried like 429."""
    upstream.push(error, Reply("retried"))

    async with OpenAIClient(base_url=upstream.base_url, max_retries=1, http=http) as client:
        if attempts == 1:
            with pytest.raises(LLMError) as caught:
                await complete(client)
            assert caught.value.status_code == error.status
        else:
            assert (await complete(client)).text == "retried"

    assert len(upstream.requests) == attempts


async def test_both_transports_send_the_sdks_headers(upstream: ScriptedUpstream) -> None:
    for http in ("httpx", "aiohttp"):
        async with OpenAIClient(base_url=upstream.base_url, api_key="sk-1", http=http) as client:
            await complete(client)
    sdk, direct = upstream.headers
    for name in ("authorization", "user-agent", "content-type", "accept", "x-stainless-lang"):
        assert direct[name] == sdk[name]


async def test_400_is_not_retried(upstream: ScriptedUpstream, client: OpenAIClient) -> None:
    """A bad request fails at once, with the upstream's own message."""
    upstream.push(StatusError(400, "Unsupported parameter: 'response_format'", code="bad_param"))

    with pytest.raises(LLMError) as caught:
        await complete(client)

    assert caught.value.status_code == 400
    assert not caught.value.retryable
    assert str(caught.value) == "upstream status 400: Unsupported parameter: 'response_format'"
    assert len(upstream.requests) == 1


async def test_huge_error_body_gives_a_short_message(
    upstream: ScriptedUpstream, client: OpenAIClient
) -> None:
    """An error page of 100 kB is not copied into the exception (nor into the logs)."""
    upstream.push(RawBody("<html>" + "x" * 100_000, status=400, content_type="text/html"))

    with pytest.raises(LLMError) as caught:
        await complete(client)

    assert caught.value.status_code == 400
    assert len(str(caught.value)) < 400


async def test_timeout(upstream: ScriptedUpstream, http: Http) -> None:
    """An answer later than the timeout is a retryable LLMError with no status."""
    upstream.push(Delay(3.0))

    async with OpenAIClient(
        base_url=upstream.base_url, timeout=0.5, max_retries=0, http=http
    ) as client:
        with pytest.raises(LLMError) as caught:
            await complete(client)

    assert caught.value.status_code is None
    assert caught.value.retryable
    assert "timed out" in str(caught.value)
    assert_caused_by(caught.value, http, "timeout")


async def test_timeout_is_retried_like_the_rest(upstream: ScriptedUpstream) -> None:
    """A slow first attempt is retried; a prompt second one answers."""
    upstream.push(Delay(3.0), Reply("second try"))

    async with OpenAIClient(base_url=upstream.base_url, timeout=0.5, max_retries=1) as client:
        completion = await complete(client)

    assert completion.text == "second try"
    assert len(upstream.requests) == 2


async def test_dropped_connection(upstream: ScriptedUpstream, http: Http) -> None:
    """A connection closed without an answer is a retryable LLMError with no status."""
    upstream.push(Drop())

    async with OpenAIClient(base_url=upstream.base_url, max_retries=0, http=http) as client:
        with pytest.raises(LLMError) as caught:
            await complete(client)

    assert caught.value.status_code is None
    assert caught.value.retryable
    assert_caused_by(caught.value, http, "connection")
    assert len(upstream.requests) == 1


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(RawBody("not json"), id="not-json"),
        pytest.param(RawBody("<html>gateway</html>", content_type="text/html"), id="html"),
        pytest.param(RawBody('{"id": "x", "object": "chat.completion"}'), id="no-choices"),
        pytest.param(RawBody('{"choices": "nope"}'), id="wrong-shape"),
    ],
)
async def test_unreadable_answer(
    upstream: ScriptedUpstream, client: OpenAIClient, body: RawBody
) -> None:
    """A 200 whose body is no chat completion is an LLMError, never a crash of another kind."""
    upstream.push(body)

    with pytest.raises(LLMError) as caught:
        await complete(client)

    assert caught.value.status_code is None
    assert not caught.value.retryable


async def test_environment_defaults(
    upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OPENAI_BASE_URL is read; with no key at all, a placeholder is sent (local servers)."""
    monkeypatch.setenv("OPENAI_BASE_URL", upstream.base_url)
    monkeypatch.delenv("OPENAI_API_KEY")

    async with OpenAIClient() as client:
        completion = await complete(client)

    assert completion.text == "Hello"
    assert client.base_url.rstrip("/") == upstream.base_url
    assert upstream.headers[0]["authorization"] == f"Bearer {NO_API_KEY}"


async def test_explicit_key_is_sent(upstream: ScriptedUpstream) -> None:
    async with OpenAIClient(base_url=upstream.base_url, api_key="sk-local") as client:
        await complete(client)

    assert upstream.headers[0]["authorization"] == "Bearer sk-local"


async def test_a_host_client_is_used_and_left_open(upstream: ScriptedUpstream) -> None:
    """The host owns the AsyncOpenAI it passes in: aclose does not close it."""
    sdk = openai.AsyncOpenAI(base_url=upstream.base_url, api_key="sk-host", max_retries=0)
    try:
        client = OpenAIClient(client=sdk)
        await complete(client)
        await client.aclose()
        assert not sdk.is_closed()
        await complete(client)
    finally:
        await sdk.close()

    assert len(upstream.requests) == 2


async def test_is_an_llm_client() -> None:
    async with OpenAIClient(base_url="http://127.0.0.1:9/v1") as client:
        assert isinstance(client, LLMClient)


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"timeout": 0}, id="zero-timeout"),
        pytest.param({"max_retries": -1}, id="negative-retries"),
        pytest.param({"max_tokens_param": "tokens"}, id="unknown-param"),
        pytest.param({"http": "requests"}, id="unknown-transport"),
    ],
)
def test_bad_settings_are_rejected(options: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        OpenAIClient(**options)  # type: ignore[arg-type]


def _closed_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"


async def test_an_unreachable_upstream_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    url = _closed_port()
    async with OpenAIClient(base_url=url, max_retries=0) as client:
        with pytest.raises(LLMError, match="could not reach the upstream") as caught:
            await complete(client)
    assert url in str(caught.value)
    assert "OPENAI_API_KEY" not in str(caught.value)  # one was configured: no hint


async def test_with_nothing_configured_the_error_says_what_to_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    async with OpenAIClient(max_retries=0) as client:
        # The SDK's default host is never contacted here: the same client, pointed at a
        # closed loopback port, keeps what was (not) configured.
        client._client = client._client.with_options(base_url=_closed_port())
        with pytest.raises(LLMError) as caught:
            await complete(client)
    message = str(caught.value)
    assert "no OPENAI_API_KEY or OPENAI_BASE_URL is set" in message
    assert "LocalModelClient()" in message


@pytest.mark.parametrize(
    "logprobs",
    [
        {"content": [{"token": "Hi", "logprob": -0.1, "bytes": [72, 105], "top_logprobs": []}]},
        {"tokens": ["Hi"], "token_logprobs": [-0.1]},  # the legacy completions' shape
        {"content": "Hi"},
        None,
    ],
)
async def test_logprobs_are_the_chat_api_s_or_none(
    upstream: ScriptedUpstream, client: OpenAIClient, logprobs: object
) -> None:
    """An answer's logprobs in the chat API's shape come back; a server's own shape is no
    reason to fail the answer."""
    choice = {"index": 0, "message": {"role": "assistant", "content": "Hi"}, "logprobs": logprobs}
    body = {
        "object": "chat.completion",
        "model": "cheap",
        "choices": [{**choice, "finish_reason": "stop"}],
    }
    upstream.push(RawBody(json.dumps(body)))

    completion = await complete(client, options={"logprobs": True})

    assert completion.text == "Hi"
    given = logprobs.get("content") if isinstance(logprobs, dict) else None
    assert completion.logprobs == (tuple(given) if isinstance(given, list) else None)
