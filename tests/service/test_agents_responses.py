"""The OpenAI Agents SDK pointed at the gateway, unchanged: its default model (Responses), with
`OpenAIConversationsSession`, and with no session, chaining ``previous_response_id``. Over
several `Runner.run` calls with a function tool, every item is stored once, in order."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

import httpx
import openai
import pytest
from agents import Agent, OpenAIConversationsSession, RunConfig, Runner, function_tool
from agents.models.openai_provider import OpenAIProvider

from workingmem.llm.testing import ScriptedUpstream

from .live import LiveServer
from .test_responses_api import answers, upstream_model
from .test_responses_api import turns as _turns

pytestmark = pytest.mark.asyncio

P = ParamSpec("P")
T = TypeVar("T")


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


AGENT = Agent(name="weather", instructions="Be brief.", model="answer-model", tools=[get_weather])


@pytest.fixture
async def client(
    service: LiveServer, key: str, upstream: ScriptedUpstream
) -> AsyncIterator[openai.AsyncOpenAI]:
    upstream.responder = upstream_model
    async with openai.AsyncOpenAI(
        base_url=f"{service.url}/v1", api_key=key, max_retries=0, timeout=10
    ) as sdk:
        yield sdk


def blocking(call: Callable[P, T]) -> Callable[P, Awaitable[T]]:
    """A call of the sync REST client, off the event loop the SDK's run needs."""

    async def run(*args: P.args, **kwargs: P.kwargs) -> T:
        return await asyncio.to_thread(call, *args, **kwargs)

    return run


async def threads_of(api: httpx.Client) -> list[dict[str, Any]]:
    page = await asyncio.to_thread(api.get, "/v1/threads")
    return list(page.json()["data"])


def assert_memory_of(request: list[dict[str, Any]], thread: list[dict[str, Any]]) -> None:
    """The model read the thread's memory: its newest turns verbatim, each once and in order,
    and the summary of those before them (written in the background: through some turn)."""
    system, *window = request
    assert system["role"] == "system"
    said = [(m["role"], m.get("content")) for m in window]
    assert said == [(m["role"], m.get("content")) for m in thread[len(thread) - len(window) :]]
    if len(window) < len(thread):
        assert "The conversation so far, through turn" in system["content"]


def config(client: openai.AsyncOpenAI) -> RunConfig:
    return RunConfig(model_provider=OpenAIProvider(openai_client=client), tracing_disabled=True)


EXPECTED_ROLES = [
    "user",
    "assistant",
    "user",
    "assistant",
    "tool",
    "assistant",
    "user",
    "assistant",
]


async def test_a_conversations_session_is_one_thread_each_item_stored_once(
    client: openai.AsyncOpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    turns = blocking(_turns)
    session = OpenAIConversationsSession(openai_client=client)
    outputs = []
    for text in ["My name is Ada.", "What is the weather in Lyon?", "Thanks"]:
        result = await Runner.run(AGENT, text, session=session, run_config=config(client))
        outputs.append(result.final_output)
    assert outputs == [
        "You said: My name is Ada.",
        "It is sunny in Lyon there.",
        "You said: Thanks",
    ]
    conversation = await session._get_session_id()
    stored = await turns(api, conversation)
    assert [m["role"] for m in stored] == EXPECTED_ROLES
    assert stored[3]["tool_calls"][0]["id"] == stored[4]["tool_call_id"]
    threads = await threads_of(api)
    assert [t["id"] for t in threads] == [conversation]  # no copy anywhere else
    assert_memory_of(answers(upstream)[-1]["messages"], stored[:-1])
    items = await session.get_items()
    assert [i.get("role") or i["type"] for i in items] == [
        "user",
        "assistant",
        "user",
        "function_call",
        "function_call_output",
        "assistant",
        "user",
        "assistant",
    ]
    popped: Any = await session.pop_item()
    assert popped is not None
    assert popped["role"] == "assistant"
    assert len(await turns(api, conversation)) == 7


async def test_no_session_chaining_previous_response_ids(
    client: openai.AsyncOpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    turns = blocking(_turns)
    previous = None
    for text in ["My name is Ada.", "What is the weather in Lyon?", "Thanks"]:
        result = await Runner.run(
            AGENT, text, previous_response_id=previous, run_config=config(client)
        )
        previous = result.last_response_id
    assert result.final_output == "You said: Thanks"
    assert previous is not None
    stored = await client.responses.retrieve(previous)
    assert stored.previous_response_id is not None
    threads = await threads_of(api)
    assert len(threads) == 1
    assert [m["role"] for m in await turns(api, threads[0]["id"])] == EXPECTED_ROLES
    assert_memory_of(answers(upstream)[-1]["messages"], (await turns(api, threads[0]["id"]))[:-1])


@pytest.mark.parametrize("chained", ["auto_previous_response_id", "conversation_id"])
async def test_a_run_chained_by_the_sdk_itself(
    chained: str, client: openai.AsyncOpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    """``Runner.run(auto_previous_response_id=True)`` chains the calls of a run (the tool
    round's too) by their ids; ``conversation_id=`` names a conversation made first: each
    run's turns land in one thread, once, in order."""
    turns = blocking(_turns)
    previous: str | None = None
    conversation = (
        (await client.conversations.create()).id if chained == "conversation_id" else None
    )
    for text in ["My name is Ada.", "What is the weather in Lyon?", "Thanks"]:
        if conversation is not None:
            result = await Runner.run(
                AGENT, text, conversation_id=conversation, run_config=config(client)
            )
        else:
            result = await Runner.run(
                AGENT,
                text,
                previous_response_id=previous,
                auto_previous_response_id=True,
                run_config=config(client),
            )
            previous = result.last_response_id
    assert result.final_output == "You said: Thanks"
    threads = await threads_of(api)
    assert len(threads) == 1
    stored = await turns(api, threads[0]["id"])
    assert [m["role"] for m in stored] == EXPECTED_ROLES
    assert_memory_of(answers(upstream)[-1]["messages"], stored[:-1])
