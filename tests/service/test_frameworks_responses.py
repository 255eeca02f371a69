"""The frameworks on OpenAI's Responses API, pointed at the gateway: LangChain's `ChatOpenAI`
with ``use_responses_api`` (a whole history resent, or ``use_previous_response_id``) and
Pydantic AI's `OpenAIResponsesModel`, each with a function tool over many turns. Real
frameworks, real HTTP, the scripted upstream behind."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAICompaction, OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider

from workingmem.llm.testing import ScriptedUpstream

from .live import LiveServer
from .test_frameworks import (
    TURNS,
    agent_over_turns,
    async_client,
    check_the_thread,
    langchain_model,
)
from .test_openai_clients import agent_upstream, answer_requests, stored


def _chat_model(service: LiveServer, key: str, http: httpx.Client, **options: Any) -> ChatOpenAI:
    return langchain_model(service, key, http, use_responses_api=True, **options)


@pytest.fixture
def http(upstream: ScriptedUpstream) -> Iterator[httpx.Client]:
    upstream.responder = agent_upstream
    with httpx.Client() as client:
        yield client


@pytest.mark.parametrize("previous", [False, True], ids=["history", "previous_response_id"])
def test_a_langchain_agent_on_the_responses_api(
    service: LiveServer,
    key: str,
    http: httpx.Client,
    upstream: ScriptedUpstream,
    api: httpx.Client,
    previous: bool,
) -> None:
    messages = agent_over_turns(_chat_model(service, key, http, use_previous_response_id=previous))
    assert "It is sunny, 21 C there." in {m.text for m in messages}
    check_the_thread(api, upstream, "langchain", history=len(stored(api, "langchain")))
    # the agent's system prompt is the model's every call, and no turn of the thread
    assert [t["content"] for t in stored(api, "langchain")[:2]] == ["Hi", "You said: Hi"]
    for sent in answer_requests(upstream):
        assert sent["messages"][0]["content"].startswith("Be brief.")


def test_a_langchain_agent_asking_for_server_side_compaction(
    service: LiveServer,
    key: str,
    http: httpx.Client,
    upstream: ScriptedUpstream,
    api: httpx.Client,
) -> None:
    """``ChatOpenAI(context_management=...)``: the compaction items come back in the answers'
    content and LangChain resends them inside its whole history; the thread holds every turn
    once and none of the items, the model its window as before."""
    compaction = [{"type": "compaction", "compact_threshold": 100}]
    messages = agent_over_turns(_chat_model(service, key, http, context_management=compaction))
    kinds = [
        block.get("type") for m in messages if isinstance(m.content, list) for block in m.content
    ]
    assert kinds.count("compaction") >= 2  # compacted, resent with the items, compacted again
    turns = stored(api, "langchain")
    assert not [t for t in turns if "compacted" in str(t["content"])]
    check_the_thread(api, upstream, "langchain", history=len(turns))
    asked = [t["content"] for t in turns if t["role"] == "user"]
    assert asked == TURNS
    for sent in answer_requests(upstream):  # its system prompt, before the items too
        assert sent["messages"][0]["content"].startswith("Be brief.")


def test_a_langchain_stream_on_the_responses_api(
    service: LiveServer, key: str, http: httpx.Client, api: httpx.Client
) -> None:
    model = _chat_model(service, key, http)
    chunks = list(model.stream([HumanMessage("Hi")]))
    assert "".join(chunk.text for chunk in chunks) == "You said: Hi"
    assert [t["role"] for t in stored(api, "langchain")] == ["user", "assistant"]


def weather_in(city: str) -> str:
    """The weather in a city (the tool Pydantic AI's agents are given)."""
    assert city == "Lyon"
    return "sunny, 21 C"


async def test_a_pydantic_ai_agent_on_the_responses_api(
    service: LiveServer, key: str, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    upstream.responder = agent_upstream
    client = async_client(service, key, "pydantic")
    async with client:
        provider = OpenAIProvider(openai_client=client)
        agent = Agent(
            OpenAIResponsesModel("answer-model", provider=provider), instructions="Be brief."
        )

        agent.tool_plain(name="get_weather")(weather_in)
        history: list[Any] = []
        for text in TURNS:
            result = await agent.run(text, message_history=history)
            history = result.all_messages()
            assert result.output
        async with agent.run_stream("Stream this.", message_history=history) as streamed:
            assert await streamed.get_output() == "You said: Stream this."
    assert "It is sunny, 21 C there." in {
        getattr(part, "content", None) for message in history for part in message.parts
    }
    check_the_thread(api, upstream, "pydantic", history=len(stored(api, "pydantic")))


async def test_a_pydantic_ai_agent_with_openai_compaction(
    service: LiveServer, key: str, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    """Pydantic AI's `OpenAICompaction(token_threshold=...)`: server-side compaction, the
    history sent from the newest compaction item on; the thread keeps every turn once."""
    upstream.responder = agent_upstream
    async with async_client(service, key, "pydantic") as client:
        model = OpenAIResponsesModel("answer-model", provider=OpenAIProvider(openai_client=client))
        agent = Agent(
            model, instructions="Be brief.", capabilities=[OpenAICompaction(token_threshold=80)]
        )
        agent.tool_plain(name="get_weather")(weather_in)
        history: list[Any] = []
        for text in TURNS:
            result = await agent.run(text, message_history=history)
            history = result.all_messages()
    kinds = [getattr(part, "part_kind", None) for m in history for part in m.parts]
    assert kinds.count("compaction") >= 2
    turns = stored(api, "pydantic")
    assert [t["content"] for t in turns if t["role"] == "user"] == TURNS
    assert not [t for t in turns if "compacted" in str(t["content"])]
