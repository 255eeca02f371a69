"""What an upstream reports of its prompt cache and of its reasoning reaches the client, on
every API, through every kind of upstream, streamed or not: the cached share of the input is
how a user sees that the memory's stable prefix is cached upstream. The official SDKs over
real HTTP; the scripted upstream reports the counts in its own API's shape."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from workingmem.llm.testing import Reply, ScriptedUpstream, tool_call
from workingmem.service import create_app

from .conftest import settings_for
from .live import LiveServer, create_key

REPORTED = Reply(
    "Noted.",
    prompt_tokens=1000,
    completion_tokens=50,
    cached_tokens=600,
    cache_write_tokens=300,
    reasoning_tokens=20,
)
HELLO = "Hello there."


@dataclass(frozen=True)
class Clients:
    url: str
    openai: openai.OpenAI
    claude: anthropic.Anthropic


@pytest.fixture
def clients(database_url: str, upstream: ScriptedUpstream, upstream_api: str) -> Iterator[Clients]:
    upstream.responder = lambda request: REPORTED
    settings = settings_for(database_url, upstream, upstream_api=upstream_api)
    with LiveServer(create_app(settings)) as live:
        key = create_key(database_url, f"t-usage-{uuid.uuid4().hex}", "tests").secret
        with (
            openai.OpenAI(base_url=f"{live.url}/v1", api_key=key, max_retries=0) as sdk,
            anthropic.Anthropic(base_url=live.url, api_key=key, max_retries=0) as claude,
        ):
            yield Clients(live.url, sdk, claude)


def counts(usage: Any, given: str = "prompt", made: str = "completion") -> tuple[int, ...]:
    """(input, output, cached, written, reasoning) of an OpenAI usage: a chat completion's,
    or a Response's (``given="input", made="output"``)."""
    given_details = getattr(usage, f"{given}_tokens_details")
    made_details = getattr(usage, f"{made}_tokens_details")
    return (
        getattr(usage, f"{given}_tokens"),
        getattr(usage, f"{made}_tokens"),
        given_details.cached_tokens,
        given_details.cache_write_tokens,
        made_details.reasoning_tokens,
    )


EVERY_INPUT = (1000, 50, 600, 300, 20)


def test_the_upstreams_counts_reach_every_api(clients: Clients) -> None:
    chat = clients.openai.chat.completions
    said: list[ChatCompletionMessageParam] = [{"role": "user", "content": HELLO}]
    answer = chat.create(model="answer-model", messages=said, extra_headers={"X-Thread-Id": "c"})
    assert counts(answer.usage) == EVERY_INPUT
    chunks = list(
        chat.create(
            model="answer-model",
            messages=said,
            stream=True,
            stream_options={"include_usage": True},
            extra_headers={"X-Thread-Id": "cs"},
        )
    )
    assert counts(chunks[-1].usage) == EVERY_INPUT

    response = clients.openai.responses.create(model="answer-model", input=HELLO)
    assert counts(response.usage, "input", "output") == EVERY_INPUT
    with clients.openai.responses.stream(model="answer-model", input=HELLO) as stream:
        final = stream.get_final_response()
    assert counts(final.usage, "input", "output") == EVERY_INPUT

    asked: list[anthropic.types.MessageParam] = [{"role": "user", "content": HELLO}]
    message = clients.claude.messages.create(model="answer-model", max_tokens=100, messages=asked)
    with clients.claude.messages.stream(
        model="answer-model", max_tokens=100, messages=asked, extra_headers={"X-Thread-Id": "ms"}
    ) as claude_stream:
        streamed = claude_stream.get_final_message()
    for usage in (message.usage, streamed.usage):
        # Anthropic's input_tokens are those the cache neither read nor wrote
        assert (usage.input_tokens, usage.output_tokens) == (100, 50)
        assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (600, 300)
        assert usage.output_tokens_details is not None
        assert usage.output_tokens_details.thinking_tokens == 20

    metrics = httpx.get(f"{clients.url}/metrics").text
    assert 'workingmem_answer_tokens_total{kind="prompt"} 6000' in metrics
    assert 'workingmem_answer_cache_tokens_total{kind="read"} 3600' in metrics
    assert 'workingmem_answer_cache_tokens_total{kind="write"} 1800' in metrics


def test_rounds_of_the_gateways_own_tools_sum_every_count(
    clients: Clients, upstream: ScriptedUpstream
) -> None:
    """The usage of an answer is the sum over its rounds, the cache's share included."""
    called = Reply(
        None,
        tool_calls=[tool_call("get_working_memory", {})],
        prompt_tokens=900,
        completion_tokens=5,
        cached_tokens=800,
    )
    upstream.push(called, REPORTED)  # before the responder, which answers the helper calls
    answer = clients.openai.chat.completions.create(
        model="answer-model",
        messages=[{"role": "user", "content": "What do you know?"}],
        extra_headers={"X-Thread-Id": "rounds"},
    )
    assert counts(answer.usage) == (1900, 55, 1400, 300, 20)
